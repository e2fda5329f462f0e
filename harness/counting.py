"""The counting passes of a cell: trace, transfers, static HLO (never while timing).

Each pass runs separately from the timing pass and from each other (profiling costs
about 7% per dispatch; the transfer guard adds its own cost). A probe that fails stores
its error next to the counts instead of a number; the timing stays valid.
"""

from __future__ import annotations

import os
from typing import Any

from harness.api import Backend


def static_counts(backend: Backend, prepared: Any) -> dict[str, Any]:
    """Static HLO estimate per call: sum over the backend's executables x calls per run."""
    from harness.probes.hlo import estimate

    if backend.executables is None:
        return {"available": False, "reason": "backend exposes no compiled executables"}
    executables = {}
    kernels = launch = unknown = 0
    for name, (compiled, calls) in backend.executables(prepared).items():
        result = estimate(compiled.as_text())
        executables[name] = {"calls_per_run": calls, **result.to_json()}
        kernels += result.kernels * calls
        launch += result.launch_equivalent * calls
        unknown += result.unknown_trip_count_loops
    return {
        "available": True,
        "kernels": kernels,
        "launch_equivalent": launch,
        "unknown_trip_count_loops": unknown,
        "executables": executables,
    }


def count_cell(
    backend: Backend, prepared: Any, platform: str, log_dir: str | None = None
) -> dict[str, Any]:
    """Counts for one call of ``backend.run(prepared)``; see the module doc."""
    from harness.probes.gpu import command_buffers_enabled, count_gpu_events
    from harness.probes.trace import trace_calls
    from harness.probes.transfers import count_transfers

    counts: dict[str, Any] = {"calls": 1}
    try:
        trace, events = trace_calls(backend.run, prepared, calls=1, log_dir=log_dir)
        counts["trace"] = trace.to_json()
        if platform == "gpu":
            flags = os.environ.get("XLA_FLAGS", "")
            counts["gpu"] = count_gpu_events(events, command_buffers_enabled(flags)).to_json()
    except Exception as error:  # stored next to the counts; the cell's timing stays valid
        counts["trace_error"] = f"{type(error).__name__}: {error}"
    try:
        counts["transfers"] = count_transfers(lambda: backend.run(prepared), platform).to_json()
    except Exception as error:
        counts["transfers_error"] = f"{type(error).__name__}: {error}"
    try:
        counts["static"] = static_counts(backend, prepared)
    except Exception as error:
        counts["static_error"] = f"{type(error).__name__}: {error}"
    return counts

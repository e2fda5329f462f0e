"""What runs inside a fresh worker process: one cell, or the environment metadata.

Usage (by the runner, not by hand)::

    python -m harness.worker cell SPEC.json OUT.json
    python -m harness.worker environment OUT.json

A cell is checked against the scenario's reference before it is timed (`harness.checks`:
no NaN/inf where the reference has none, a finite max error, inputs left unchanged): a
backend that fails is stored as a failed record and never timed. Its last timed output is
checked again, so a backend that goes wrong on repetition fails too, saying so.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from harness.api import Record
from harness.checks import InputSnapshot, check_again, checked_error
from harness.counting import counts_per_call
from harness.registry import Cell, get_scenario
from harness.sharding import cell_device_info, initialize_distributed
from harness.statistics import summarize
from harness.store import write_json_atomic
from harness.timing import TimingConfig, repeat, time_call


def configure_jax(dtype: str) -> bool:
    """Enable 64-bit JAX for float64 cells (a process-wide flag: one cell per process)."""
    import jax

    x64 = dtype == "float64"
    jax.config.update("jax_enable_x64", x64)
    return x64


def _skipped(scenario, backend, size, cell: Cell, base: dict[str, Any]) -> Record:
    """A skipped record, with the backend's extrapolated cost when it can estimate one."""
    reason = backend.skip_reason or "backend does not run at this size"
    message = f"skipped at size {size.name!r}: {reason}"
    extra: dict[str, Any] = {}
    if backend.estimate is not None:
        try:
            configure_jax(cell.dtype)
            inputs = scenario.make_inputs(size, cell.seed, cell.dtype)
            extra = dict(backend.estimate(inputs, size))
            estimated = extra["estimated_s"]
            message += f"; estimated {estimated:.3g} s per run (partial run, extrapolated)"
        except Exception as error:  # the estimate is informative; the skip stands anyway
            extra = {"estimate_error": f"{type(error).__name__}: {error}"}
    return Record(status="skipped", error=message, extra=extra, **base)


def run_cell(
    cell: Cell, timing: TimingConfig, probes: bool = True, counts_only: bool = False
) -> Record:
    """Prepare, check, time, then count one cell; any exception becomes a failed record.

    Args:
        probes: run the counting passes (trace, transfers, static HLO) after timing.
        counts_only: check and count, but take no timing samples (used for the extra GPU
            profiling pass with command buffers on).
    """
    started = time.perf_counter()
    scenario = get_scenario(cell.scenario, cell.scenario_file)
    backend = scenario.backend(cell.backend)
    size = scenario.size(cell.size)
    base: dict[str, Any] = {
        "scenario": scenario.name,
        "backend": backend.name,
        "strategy": str(backend.strategy),
        "engine": backend.engine,
        "size": size.name,
        "dtype": cell.dtype,
        "seed": cell.seed,
        "devices": cell.devices,
        "size_params": dict(size.params),
        "work": dict(scenario.work(size, cell.dtype)),
    }
    if not backend.runs_at(size.name):
        return _skipped(scenario, backend, size, cell, base)
    try:
        from harness.environment import device_info

        if initialize_distributed():  # every process must make the same calls: by count
            timing = dataclasses.replace(timing, min_time_s=0.0, max_count=timing.min_count)
        base["x64"] = configure_jax(cell.dtype)
        base["device"] = {**device_info(), **cell_device_info()}
        inputs = scenario.make_inputs(size, cell.seed, cell.dtype)
        expected = scenario.reference(inputs)
        snapshot = InputSnapshot.of(inputs)
        start = time.perf_counter()
        prepared = backend.prepare(inputs, size)
        prepare_s = time.perf_counter() - start
        output, first_call_s = time_call(backend.run, prepared)
        snapshot.verify(inputs, "during prepare or the first call")
        max_error = checked_error(
            scenario.check, backend.to_reference(output), expected, cell.dtype
        )
        described = scenario.describe_output(output) if scenario.describe_output else None
        samples: tuple[float, ...] = ()
        if not counts_only:
            samples, last = repeat(backend.run, prepared, timing)
            calls = 1 + timing.warmup + len(samples)
            snapshot.verify(inputs, f"during the first {calls} calls")
            last_error = check_again(
                scenario.check, backend.to_reference(last), expected, cell.dtype, calls
            )
            max_error = max(max_error, last_error)
        counts: dict[str, Any] = {}
        if probes or counts_only:
            counts = counts_per_call(
                scenario, backend, size, prepared, cell.seed, cell.dtype, base["device"]
            )
    except Exception as error:  # a failed cell is stored with its error; the run goes on
        return Record(
            status="failed",
            error=f"{type(error).__name__}: {error}",
            wall_s=time.perf_counter() - started,
            extra={"traceback": traceback.format_exc(limit=8)},
            **base,
        )
    return Record(
        status="ok",
        prepare_s=prepare_s,
        first_call_s=first_call_s,
        samples_s=samples,
        stats=summarize(samples, timing.confidence, seed=cell.seed) if samples else {},
        max_error=max_error,
        wall_s=time.perf_counter() - started,
        counts=counts,
        extra={"output": dict(described)} if described else {},
        **base,
    )


def profile_cell(cell: Cell, log_dir: str) -> dict[str, Any]:
    """Check one cell, then trace one warm call into ``log_dir`` and count it."""
    from harness.environment import device_info

    scenario = get_scenario(cell.scenario, cell.scenario_file)
    backend = scenario.backend(cell.backend)
    size = scenario.size(cell.size)
    configure_jax(cell.dtype)
    inputs = scenario.make_inputs(size, cell.seed, cell.dtype)
    expected = scenario.reference(inputs)
    prepared = backend.prepare(inputs, size)
    output, _ = time_call(backend.run, prepared)
    checked_error(scenario.check, backend.to_reference(output), expected, cell.dtype)
    from harness.counting import count_cell

    return count_cell(backend, prepared, device_info()["platform"], log_dir=log_dir)


def cell_spec(
    cell: Cell, timing: TimingConfig, probes: bool = True, counts_only: bool = False
) -> dict[str, Any]:
    return {
        "cell": dataclasses.asdict(cell),
        "timing": dataclasses.asdict(timing),
        "probes": probes,
        "counts_only": counts_only,
    }


def _exit_with_parent(folder: Path) -> None:
    """Remove ``folder`` (this worker's temp folder) and exit when the parent asks
    (SIGTERM: a Ctrl-C, a timeout) or dies (SIGTERM from the kernel, see
    `harness.processes`; a watchdog thread also notices being re-parented)."""
    parent = os.getppid()

    def clean_and_exit(*_: object) -> None:
        shutil.rmtree(folder, ignore_errors=True)
        os._exit(143)

    signal.signal(signal.SIGTERM, clean_and_exit)

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                clean_and_exit()

    threading.Thread(target=watch, name="scanbench-parent-watch", daemon=True).start()


def main(argv: list[str]) -> int:
    if argv and argv[-1] and Path(argv[-1]).parent.name.startswith("scanbench-"):
        _exit_with_parent(Path(argv[-1]).parent)
    if len(argv) == 3 and argv[0] == "cell":
        spec = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
        record = run_cell(
            Cell(**spec["cell"]),
            TimingConfig(**spec["timing"]),
            probes=spec.get("probes", True),
            counts_only=spec.get("counts_only", False),
        )
        write_json_atomic(argv[2], record.to_json())
        return 0
    if len(argv) == 4 and argv[0] == "profile":
        spec = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
        write_json_atomic(argv[3], profile_cell(Cell(**spec["cell"]), argv[2]))
        return 0
    if len(argv) == 2 and argv[0] == "environment":
        from harness.environment import collect
        from harness.probes.overheads import measure_all

        write_json_atomic(argv[1], {**collect(), "overheads": measure_all()})
        return 0
    print(
        "usage: python -m harness.worker (cell SPEC OUT | profile SPEC DIR OUT | environment OUT)",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

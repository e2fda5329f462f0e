"""Where a cell's time goes: counts x unit costs, measured recompilation, the remainder.

For one call with median time ``T``:

    dispatch  = dispatches x (queued cost of one dispatch)
    launch    = kernels (trace, executed on this device) x (cost of one kernel launch)
    transfer  = H2D count x latency + H2D bytes / bandwidth  (+ the same for D2H off CPU)
    compile   = time spent tracing, lowering and compiling inside the call (measured by
                `harness.probes.compilations`; 0 for a warm, compiled backend)
    remainder = T - the above: device compute, host Python between calls and waits,
                together; it is not measured, only what is left

The unit costs come from ``harness.probes.overheads``, measured on the same device in
the same run. When the parts add up to more than ``T`` (queued dispatches overlap with
device work), the remainder is clamped at 0 and ``overlap`` is set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PARTS = ("dispatch", "launch", "transfer", "compile", "remainder")


def decompose(
    median_s: float, counts: Mapping[str, Any], costs: Mapping[str, Any]
) -> dict[str, Any]:
    """Seconds and fractions of ``median_s`` per part (pure)."""
    trace = counts.get("trace") or {}
    transfers = counts.get("transfers") or {}
    missing = [
        name
        for name, present in (
            ("trace counts", "dispatches" in trace),
            ("transfer counts", "h2d" in transfers),
            ("dispatch cost", "dispatch_queued_s" in costs),
            ("transfer cost", "h2d_latency_s" in costs),
        )
        if not present
    ]
    if missing:
        return {"error": f"cannot decompose: missing {', '.join(missing)}"}
    calls = counts.get("calls") or 1
    scale = counts.get("scale", 1.0) / calls  # counts of `calls` calls, maybe at a smaller size
    dispatch = scale * trace["dispatches"] * costs["dispatch_queued_s"]
    launch_cost = costs.get("kernel_launch_s")
    launch = scale * trace["kernels"] * launch_cost if launch_cost is not None else 0.0
    transfer = transfers["h2d"] * costs["h2d_latency_s"]
    transfer += transfers.get("h2d_bytes", 0) / costs["h2d_bytes_per_s"]
    if transfers.get("d2h"):
        transfer += transfers["d2h"] * costs["d2h_latency_s"]
        transfer += (transfers.get("d2h_bytes") or 0) / costs["d2h_bytes_per_s"]
    transfer *= scale
    compile_s = scale * (counts.get("compilations") or {}).get("total_s", 0.0)
    remainder = median_s - dispatch - launch - transfer - compile_s
    result: dict[str, Any] = {
        "dispatch_s": dispatch,
        "launch_s": launch,
        "transfer_s": transfer,
        "compile_s": compile_s,
        "remainder_s": max(remainder, 0.0),
        "overlap": remainder < 0,
        "launch_cost_known": launch_cost is not None,
        "compile_measured": "compilations" in counts,
    }
    for key in PARTS:
        result[f"{key}_fraction"] = result[f"{key}_s"] / median_s if median_s > 0 else 0.0
    return result

"""Where a cell's time goes: counts x unit costs, compute as the remainder.

For one call with median time ``T``:

    dispatch = dispatches x (queued cost of one dispatch)
    launch   = kernels (trace, executed on this device) x (cost of one kernel launch)
    transfer = H2D count x latency + H2D bytes / bandwidth  (+ the same for D2H off CPU)
    compute  = T - dispatch - launch - transfer

The unit costs come from ``harness.probes.overheads``, measured on the same device in
the same run. When the overheads add up to more than ``T`` (they overlap with compute,
e.g. queued dispatches), compute is clamped at 0 and ``overlap`` is set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def decompose(
    median_s: float, counts: Mapping[str, Any], costs: Mapping[str, Any]
) -> dict[str, Any]:
    """Seconds and fractions of ``median_s`` per component (pure)."""
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
    scale = counts.get("scale", 1.0)  # counts made on a smaller size -> one call
    dispatch = scale * trace["dispatches"] * costs["dispatch_queued_s"]
    launch_cost = costs.get("kernel_launch_s")
    launch = scale * trace["kernels"] * launch_cost if launch_cost is not None else 0.0
    transfer = transfers["h2d"] * costs["h2d_latency_s"]
    transfer += transfers.get("h2d_bytes", 0) / costs["h2d_bytes_per_s"]
    if transfers.get("d2h"):
        transfer += transfers["d2h"] * costs["d2h_latency_s"]
        transfer += (transfers.get("d2h_bytes") or 0) / costs["d2h_bytes_per_s"]
    transfer *= scale
    overhead = dispatch + launch + transfer
    compute = median_s - overhead
    result: dict[str, Any] = {
        "dispatch_s": dispatch,
        "launch_s": launch,
        "transfer_s": transfer,
        "compute_s": max(compute, 0.0),
        "overlap": compute < 0,
        "launch_cost_known": launch_cost is not None,
    }
    for key in ("dispatch", "launch", "transfer", "compute"):
        result[f"{key}_fraction"] = result[f"{key}_s"] / median_s if median_s > 0 else 0.0
    return result

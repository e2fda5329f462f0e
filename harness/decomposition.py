"""Where a cell's time goes: measured device time, host costs by count, the host rest.

For one call with median time ``T`` (untimed probes, same run, same device):

    device    = the share of the traced call an XLA program executed, off the calling
                threads (`scanbench.probes.spans`), x T; the profiler's recording cost
                (recorded events x measured cost per event) taken out of both the busy
                time and the traced call's wall time first. A share, not the busy
                seconds, because the traced call may run at another speed than the timed
                ones (this VM has spells of 1.5-2x). Less, on CPU, the launch part below;
                0 for a backend that runs no XLA program
    launch    = kernels (trace) x (cost of one kernel launch), an estimate: on CPU the
                thunk executor's time between kernels, inside the device time above
    dispatch  = dispatches x (queued cost of one dispatch)
    transfer  = by path, each priced by its own unit cost:
                  device_put-like H2D (logged with a shape): count x latency + bytes / bandwidth
                  jitted-call arguments (logged without one: Python scalar, NumPy scalar or
                    array, not told apart): count x [cheapest, dearest] argument cost
                  device to host: D2H count x latency + bytes / bandwidth off CPU; on CPU
                    the host conversions (`scanbench.probes.conversions`) x [ready
                    conversion, the wait a pending one forces]
                a range when a path is unknown; the shares use its middle
    sync      = the share of the traced call during which the host sat inside the code's
                own explicit waits (``block_until_ready``, annotated in the trace by
                `scanbench.probes.conversions`) *and no device was busy*
                (`scanbench.probes.spans` ``wait_idle_s``), x T: a wait that sleeps
                while the device computes costs nothing the device was not doing anyway;
                the wake-up and a wait on a value already computed are what it costs.
                Records stored before the idle part was measured: the time inside the
                waits, but never more than the device-idle share of the traced call
                (``sync_bound``: an upper bound); older still: waits x the probe's cost
                of one wait after a small asynchronous call
    compile   = tracing, lowering and compiling inside the call (measured,
                `scanbench.probes.compilations`; 0 for a warm, compiled backend)
    host      = T - all of the above: host work the probes do not name (Python between
                calls, NumPy, Numba or SciPy code, waiting); the rest, named as such

When the parts add up to more than ``T`` (host and device work overlapped, or the
profiler inflated the device share), ``host`` is 0 and ``overlap`` is the excess as a
fraction of ``T``. The unit costs come from ``scanbench.probes.overheads``.

**Reliable or not.** The measured shares come from one traced call; that call may run
far from the median (a one-dispatch call traced at 6-28x its median at `smoke`: the
profiler's start, a slow spell). The decomposition is *unreliable* (``reliable``
False, ``unreliable`` says why) when the traced call, the profiler's recording cost taken
out, took more than `TRACED_MAX` x the median (for a call that dispatches anything: host
code has no traced share to misread), or when the parts add up to more than
``T`` by over `ADD_UP` (``parts_fraction``): the diagnosis then reads its counts alone
(counts x unit costs), not the traced shares.

Results stored before the device time was measured have no ``spans``: their ``device``
and ``host`` are None and ``remainder`` (= device + host) is all they say.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .counts import Counts

PARTS = ("dispatch", "launch", "transfer", "sync", "compile", "device", "host")
TRACED_MAX = 2.0  # a traced call beyond this x the median: its shares are not the median's
ADD_UP = 0.05  # parts may exceed the median by this much (estimates): more does not add up


def _traced_wall_s(spans: Mapping[str, Any], event_s: float) -> float | None:
    """The traced call's wall time without the profiler's recording cost."""
    wall = spans.get("wall_s")
    if not wall:
        return None
    return max(wall - (spans.get("events") or 0) * event_s, 1e-12)


def sync_seconds(
    median_s: float,
    conversions: Mapping[str, Any],
    spans: Mapping[str, Any],
    scale: float,
    costs: Mapping[str, Any],
    device_s: float | None = None,
) -> tuple[float, bool]:
    """The code's own waits in one call of ``median_s`` (see the module doc), and whether
    that is an upper bound: the device-idle share of the traced call inside them; for
    records without it, the share the host spent inside them capped by the device-idle
    share (``device_s``); without either, waits x the probe's cost of one (``scale``: per
    call)."""
    if not conversions.get("waits"):
        return 0.0, False
    wall = _traced_wall_s(spans, costs.get("profiler_event_s", 0.0))
    idle = spans.get("wait_idle_s")
    if idle is not None and wall:
        return min(max(idle, 0.0) / wall, 1.0) * median_s, False
    waited, traced = conversions.get("waited_s"), spans.get("wall_s")
    if waited is not None and traced:
        inside = min(max(waited, 0.0) / traced, 1.0) * median_s
        if device_s is None:
            return inside, True
        return min(inside, max(median_s - device_s, 0.0)), True
    return scale * (conversions.get("waits") or 0) * costs.get("wait_s", 0.0), False


def _transfer_range(
    transfers: Mapping[str, Any], conversions: float, costs: Mapping[str, Any]
) -> tuple[float, float]:
    """Seconds of one counted region's transfers, as (low, high), priced by path."""
    known = transfers["h2d"] - (transfers.get("h2d_unknown_size") or 0)
    put = known * costs["h2d_latency_s"] + transfers.get("h2d_bytes", 0) / costs["h2d_bytes_per_s"]
    arguments = transfers.get("h2d_unknown_size") or 0
    argument_costs = [costs[k] for k in costs if k.startswith("arg_") and k.endswith("_s")]
    if argument_costs:
        low, high = arguments * min(argument_costs), arguments * max(argument_costs)
    else:  # unit costs of an older run: every transfer priced as a device_put
        low = high = arguments * costs["h2d_latency_s"]
    if transfers.get("d2h"):
        d2h = transfers["d2h"] * costs["d2h_latency_s"]
        d2h += (transfers.get("d2h_bytes") or 0) / costs["d2h_bytes_per_s"]
        low, high = low + d2h, high + d2h
    elif conversions:  # a value still being computed: the conversion waits for it
        ready = costs["d2h_latency_s"]
        pending = max(ready, costs.get("d2h_pending_s", ready), costs.get("wait_s", ready))
        low += conversions * ready
        high += conversions * pending
    return put + low, put + high


def device_seconds(median_s: float, spans: Mapping[str, Any], event_s: float) -> float | None:
    """Device time of one call of ``median_s``: the busy share of the traced call, the
    profiler's recording cost (``event_s`` per recorded event) taken out first."""
    needed = ("wall_s", "device_busy_s", "events", "busy_events")
    if any(spans.get(key) is None for key in needed):
        return None
    busy = spans["device_busy_s"] - spans["busy_events"] * event_s
    if busy <= 0:
        return 0.0
    # the cost per event is measured on kernel events; where other events dominate, it
    # can exceed what they cost: the corrected wall is never taken below the busy time
    wall = max(spans["wall_s"] - spans["events"] * event_s, busy)
    return min(busy / wall, 1.0) * median_s


def decompose(median_s: float, counts: Counts, costs: Mapping[str, Any]) -> dict[str, Any]:
    """Seconds and fractions of ``median_s`` per part (pure; see the module doc)."""
    trace, transfers, spans = counts.trace, counts.transfers, counts.spans
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
    # a count the linear model found not linear has no number (`scanbench.probes.extrapolation`)
    unknown = [
        f"{section}.{key}"
        for section, values, keys in (
            ("trace", trace, ("dispatches", "kernels")),
            ("transfers", transfers, ("h2d", "h2d_bytes", "h2d_unknown_size")),  # d2h: None on CPU
            ("spans", spans, ("host_conversions",)),
        )
        for key in keys
        if key in values and values[key] is None
    ]
    if unknown:
        return {"error": f"cannot decompose: no number for {', '.join(unknown)} (not linear)"}
    scale = 1.0 / counts.calls_per_region  # counts of `calls` calls, maybe at a smaller size
    dispatch = scale * trace["dispatches"] * costs["dispatch_queued_s"]
    launch_cost = costs.get("kernel_launch_s")
    launch = scale * trace["kernels"] * launch_cost if launch_cost is not None else 0.0
    conversions = counts.conversions.get("total", spans.get("host_conversions")) or 0
    low, high = (scale * seconds for seconds in _transfer_range(transfers, conversions, costs))
    transfer = (low + high) / 2
    compile_s = scale * counts.compilations.get("total_s", 0.0)
    device = device_seconds(median_s, spans, costs.get("profiler_event_s", 0.0))
    measured = device is not None
    sync, sync_bound = sync_seconds(median_s, counts.conversions, spans, scale, costs, device)
    if measured and costs.get("platform", "cpu") == "cpu":
        device = max(device - launch, 0.0)
    device = device if measured else 0.0
    rest = median_s - dispatch - launch - transfer - sync - compile_s - device
    parts = (median_s - rest) / median_s if median_s > 0 else 0.0
    wall = _traced_wall_s(spans, costs.get("profiler_event_s", 0.0))
    traced = None if wall is None or median_s <= 0 else scale * wall / median_s
    result: dict[str, Any] = {
        "dispatch_s": dispatch,
        "launch_s": launch,
        "transfer_s": transfer,
        "transfer_low_s": low,
        "transfer_high_s": high,
        "sync_s": sync,
        "compile_s": compile_s,
        "device_s": device if measured else None,
        "host_s": max(rest, 0.0) if measured else None,
        "remainder_s": max(median_s - dispatch - launch - transfer - sync - compile_s, 0.0),
        "overlap": rest < 0,
        "overlap_fraction": max(-rest, 0.0) / median_s if median_s > 0 else 0.0,
        "device_measured": measured,
        "launch_cost_known": launch_cost is not None,
        "compile_measured": "compilations" in counts.sections,
        "sync_bound": sync_bound,
        "parts_fraction": parts,
        "traced_over_median": traced,
        **_reliability(traced if trace.get("dispatches") else None, parts, measured),
    }
    for key in (*PARTS, "remainder", "transfer_low", "transfer_high"):
        seconds = result[f"{key}_s"]
        fraction = None if seconds is None else (seconds / median_s if median_s > 0 else 0.0)
        result[f"{key}_fraction"] = fraction
    return result


def _reliability(traced: float | None, parts: float, measured: bool) -> dict[str, Any]:
    """Whether the traced shares describe the median (see the module doc), and why not."""
    why = []
    if traced is not None and traced > TRACED_MAX:
        why.append(f"the traced call took {traced:.1f}x the median")
    if measured and parts > 1.0 + ADD_UP:
        why.append(f"the parts add up to {parts:.0%} of the median")
    return {"reliable": not why, "unreliable": "; ".join(why)}


def decomposition_of(record: Any, environment: Mapping[str, Any]) -> dict[str, Any]:
    """A stored record's decomposition by the rules above, from its counts and the run's
    unit costs (so that results stored under older rules read by these), else as stored."""
    costs = environment.get("overheads") or {}
    median = (record.stats or {}).get("median")
    if record.status != "ok" or median is None or not costs or not record.counts:
        return dict(record.decomposition)
    try:
        decomposition = decompose(median, record.counts, costs)
    except KeyError:  # a unit cost an older run did not measure: what it stored
        return dict(record.decomposition)
    return dict(record.decomposition) if "error" in decomposition else decomposition

"""Exact counts at a size too big to trace: count at 2, 3 and 4 units, extrapolate.

A scenario whose work repeats along one size parameter (MPPI: ``generations``) names it
in ``Scenario.count_along``. Tracing a full-size call can mean ~10^7 profiler events, so
the counting passes run with that parameter at 2, 3 and 4, and every count is modelled as
``count(n) = fixed + per_unit x n``: from n = 2 and 3, ``per_unit = c3 - c2`` and
``fixed = c2 - 2 per_unit``; n = 4 must land exactly on the line (counts are integers and
deterministic), else the count is reported as *not linear* and given no number. Once-per-
call work (the one dispatch of a scanned tuning run, setup transfers) stays fixed instead
of being multiplied by n, which is what scaling one unit by n got wrong.

Why not 1, 2, 3: XLA compiles a loop of trip count 1 differently (the while loop is
removed, `jnp.stack` of one array is a copy), so the counts at 1 are off the line the
others lie on (measured: the scanned MPPI backend's kernels at 1, 2, 3 generations).

Durations (keys ending in ``_s``, e.g. recompilation time) and the trace's measured spans
(`scanbench.probes.spans`: busy times and the events the profiler recorded) are
extrapolated the same way but not held to the exactness check: they are measurements,
not counts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

POINTS = (2, 3, 4)
# measurements (times, events recorded, waits that found their value pending):
# extrapolated, not held to the exactness check
MEASURED = (".spans.", ".conversions.pending_waits")  # waited_s: a duration (_s)
# XLA's cost analysis (`scanbench.probes.operations`) and host code's Python lines
# (`scanbench.probes.lines`): exact when on the line, but a total off it is no count the
# gate holds: it loses its number without a ``linear_error``
NOT_GATED = (".static.flops", ".static.transcendentals", ".static.bytes_accessed", ".python.")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _exact(value: float) -> float | int:
    return round(value) if float(value).is_integer() else value


def extrapolate(
    points: Sequence[Any], n: int, path: str = ""
) -> tuple[Any, dict[str, tuple[float, float]], list[str]]:
    """The counts at ``n`` from counts at `POINTS` (same structure), by the linear model.

    Returns:
        (counts at n, {path: (fixed, per_unit)} for every numeric leaf, [paths of counts
        that are not linear, whose value at n is None]).
    """
    first = points[0]
    model: dict[str, tuple[float, float]] = {}
    nonlinear: list[str] = []
    if isinstance(first, Mapping):
        out = {}
        keys = list(dict.fromkeys(key for p in points if isinstance(p, Mapping) for key in p))
        for key in keys:
            values = [p.get(key, 0) if isinstance(p, Mapping) else None for p in points]
            if any(isinstance(p, Mapping) and key not in p for p in points) and not all(
                _is_number(v) for v in values
            ):
                out[key] = next(v for v in values if v is not None)  # structural: first seen
                continue
            out[key], sub_model, sub_nonlinear = extrapolate(values, n, f"{path}.{key}")
            model.update(sub_model)
            nonlinear += sub_nonlinear
        return out, model, nonlinear
    same_length = all(isinstance(p, list) and len(p) == len(first) for p in points)
    if isinstance(first, list) and same_length:
        out_list = []
        for index in range(len(first)):
            value, sub_model, sub_nonlinear = extrapolate(
                [p[index] for p in points], n, f"{path}[{index}]"
            )
            out_list.append(value)
            model.update(sub_model)
            nonlinear += sub_nonlinear
        return out_list, model, nonlinear
    if all(_is_number(p) for p in points):
        (a, b, c), (ca, cb, cc) = POINTS, (float(p) for p in points)
        if not all(math.isfinite(v) for v in (ca, cb, cc)):
            return None, model, [*nonlinear, path]
        per_unit = (cb - ca) / (b - a)
        fixed = ca - per_unit * a
        is_duration = path.endswith("_s") or path.startswith(MEASURED)
        if not is_duration and abs(fixed + c * per_unit - cc) > 1e-9 * max(1.0, abs(cc)):
            return None, model, [*nonlinear, path]
        model[path] = (_exact(fixed), _exact(per_unit))
        return _exact(fixed + per_unit * n), model, nonlinear
    return first, model, nonlinear  # strings, booleans, ragged lists: as counted at 1


def _prune(value: Any, depth: int = 0) -> Any:
    """Breakdown entries (below the totals) that were off the line are left out."""
    if isinstance(value, dict):
        return {
            key: _prune(item, depth + 1)
            for key, item in value.items()
            if not (item is None and depth >= 2)
        }
    return value


def linear_counts(points: Sequence[Mapping[str, Any]], along: str, n: int) -> dict[str, Any]:
    """Counts per call at ``along`` = n from the counts at `POINTS` (see module doc),
    with ``counts["linear"]`` holding the model and what was not linear.

    A total (``trace.kernels``) off the line gets no number and a ``linear_error``; a
    breakdown entry off the line (``trace.kernels_by_op.<op>``: XLA numbers its ops anew
    in every compilation, so an op's name can differ between the counted sizes while the
    total stays exact) is left out of the breakdown and listed in ``not_linear_details``.
    """
    counts, model, nonlinear = extrapolate(list(points), n)
    totals = [p.lstrip(".") for p in nonlinear if p.count(".") == 2 and not p.startswith(NOT_GATED)]
    details = [p.lstrip(".") for p in nonlinear if p.count(".") != 2 or p.startswith(NOT_GATED)]
    gated = {path.lstrip("."): parts for path, parts in model.items() if path.count(".") == 2}
    counts = _prune(counts)
    counts["linear"] = {
        "along": along,
        "counted_at": list(POINTS),
        "n": n,
        "model": {path: list(parts) for path, parts in gated.items()},
        "not_linear": totals,
        "not_linear_details": details,
    }
    if totals:
        counts["linear_error"] = (
            f"not linear in {along} (counted at {', '.join(map(str, POINTS))}): "
            + ", ".join(totals[:5])
        )
    return counts

"""How the cost grows with the work: the growth analysis a grown run stored, as a report
section (`GrowthSection`: the fitted costs table, the crossover and trend sentences, the
points skipped, the sentence about the user's own size); its log-log plot is drawn by
`scanbench.reports.growth_plot`.

A grown run (``scanbench run --grow``, ``compare(..., grow=...)``) stores its analysis in
its invocation (`scanbench.invocation.Growth.analysis`, each item
`scanbench.growth.analysis.SweepAnalysis.to_json`:
per sweep its lines with points, fit, count lines and priced overheads, its crossovers
with their confirmations, its trends and the user's own size). This module reads that and
nothing else: a report never fits again; text is made here, from the stored numbers.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from scanbench.api import grown_parts
from scanbench.results import Run
from scanbench.units import format_seconds, number

if TYPE_CHECKING:
    from .plots import Plot


VERDICT = {
    "confirmed": "as predicted",
    "tie": "not told apart there, as next to a crossing",
    "contradicted": "the prediction does not hold there",
}


@dataclasses.dataclass(frozen=True)
class GrowthSection:
    """One sweep of one run, ready to render (markdown and HTML choose the markup)."""

    title: str
    run: int
    scenario: str
    base: str
    axis: str
    fits: pd.DataFrame
    crossovers: tuple[str, ...]
    trends: tuple[str, ...]
    own: str | None
    skipped: tuple[str, ...]
    notes: tuple[str, ...]
    analysis: Mapping[str, Any]  # the stored analysis (for the plot)

    def plot(self) -> Plot | None:
        # imported here for start-up cost only: the plot imports matplotlib, which the
        # markdown report (text only) never needs
        from .growth_plot import growth_plot

        return growth_plot(self.analysis, self.title)


def is_grown(size: str) -> bool:
    """Whether a record's size is a point of a sweep (``BASE@AXIS=VALUE``)."""
    return grown_parts(size) is not None


def _with_interval(value: float, interval: Sequence[float] | None, format_one) -> str:
    """``202 us ±0.3%`` (the larger side of a 95% interval within ±50%), else
    ``3 us (0–9 us)``, else the value alone."""
    if not interval or any(v is None for v in interval):
        return format_one(value)
    low, high = interval
    if value > 0 and 0.5 * value <= low and high <= 1.5 * value:
        half = max(high - value, value - low) / value
        return f"{format_one(value)} ±{max(half, 0.001):.1%}"
    return f"{format_one(value)} ({format_one(low)}–{format_one(high)})"


def _ratio(value: float) -> str:
    """``1.02x``, ``13.4x``, ``120x``: never an exponent, two decimals near 1."""
    digits = 2 if value < 10 else 1 if value < 100 else 0
    return f"{value:.{digits}f}x"


def _seconds(value: float) -> str:
    """A priced cost: rounding noise of a line fit (below a picosecond) shown as 0."""
    return "0" if abs(value) < 1e-12 else format_seconds(value)


def _units(value: float) -> str:
    """An amount along an axis: ``8.78``, ``790``, ``93,638``."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _count_text(counts: Sequence[Mapping[str, Any]], axis: str) -> str:
    parts = []
    for line in counts:
        if line["linear"]:
            if line["fixed"] or line["per_unit"]:
                parts.append(
                    f"{line['name']} {number(line['fixed'])} + {number(line['per_unit'])} {axis}"
                )
        else:
            values = ", ".join(number(v) for v in line["values"])
            parts.append(f"{line['name']} not linear ({values})")
    return "; ".join(parts) or ("none" if counts else "-")


def _singular(unit: str) -> str:
    return unit[:-1] if unit.endswith("s") else unit


def _fits_table(analysis: Mapping[str, Any]) -> pd.DataFrame:
    """Per backend: the points fitted, the fitted fixed and per-unit costs with their 95%
    intervals, the exponent, how far the fit is off, the same costs priced from the
    counts (dispatches, launches, transfers, waits x unit costs) and the count lines."""
    sweep = analysis["sweep"]
    axis, per = sweep["axis"], f"per {_singular(sweep['unit'])}"
    rows = []
    for line in analysis["lines"]:
        fit, priced = line["fit"], line["priced"]
        fitted = [p["units"] for p in line["points"] if p["fitted"]]
        where = f" ({axis} = {_units(min(fitted))}–{_units(max(fitted))})" if fitted else ""
        row = {"backend": line["label"], "points fitted": f"{len(fitted)}{where}"}
        if fit is not None:
            power = f" x {axis}^{fit['exponent']:.2f}" if fit["exponent_fitted"] else ""
            exponent = f"{fit['exponent']:.2f}" if fit["exponent_fitted"] else "1"
            free = fit["exponent_interval"]
            row["fixed per call"] = _with_interval(
                fit["fixed_s"], fit["fixed_interval"], format_seconds
            )
            row[per] = (
                _with_interval(fit["per_unit_s"], fit["per_unit_interval"], format_seconds) + power
            )
            row["exponent"] = exponent + (f" (free: {free[0]:.2f}–{free[1]:.2f})" if free else "")
            row["fit off by (rms)"] = f"{fit['rms']:.1%}"
        if priced is not None:
            row["fixed from counts"] = _seconds(priced["fixed_s"])
            row[f"{per} from counts"] = _seconds(priced["per_unit_s"])
        row["counts per call"] = _count_text(line["counts"], axis)
        rows.append(row)
    return pd.DataFrame(rows).fillna("-")


def _crossover_text(crossover: Mapping[str, Any], axis: str, rough_lines: set[str]) -> str:
    above, below = crossover["above"], crossover["below"]
    text = (
        f"{above} beats {below} from {axis} >= {crossover['confirm_at']:,}: the fits cross "
        f"at {axis} = {_units(crossover['at'])}"
    )
    interval = crossover["interval"]
    if interval:
        text += f" (95% interval {_units(interval[0])}–{_units(interval[1])})"
    rough = [name for name in (below, above) if name in rough_lines]
    if rough:
        text += f" (a rough fit: {', '.join(rough)}; the measurement decides)"
    if crossover["crossing_share"] < 0.95:
        text += f", in {crossover['crossing_share']:.0%} of the resamples"
    if not crossover["inside"]:
        text += ", beyond the measured points by less than a step"
    confirmation = crossover["confirmation"]
    if confirmation is None and not crossover.get("measurable", True):
        return text + (
            f"; not measured: {axis} = {crossover['confirm_at']:,} is far beyond the points "
            "measured (a sweep that reaches it measures it)"
        )
    if confirmation is None:
        return text + f"; not confirmed: {axis} = {crossover['confirm_at']:,} was not measured"
    ratio = confirmation["ratio"]
    where = "an added point" if confirmation["added"] else "a point of the sweep"
    bounds = confirmation["interval"]
    if ratio >= 1:
        measured = f"{above} {_ratio(ratio)} faster"
    else:  # the other way round: the interval inverted too
        measured = f"{below} {_ratio(1 / ratio)} faster"
        bounds = [1 / bounds[1], 1 / bounds[0]] if bounds else None
    spread = f" ({bounds[0]:.3g}–{bounds[1]:.3g})" if bounds else " (no interval)"
    predicted = crossover["predicted_ratio"]
    return (
        f"{text}. Measured at {axis} = {confirmation['at']:,} ({where}): {measured}{spread}, "
        f"predicted {_ratio(predicted)}: {_verdict(confirmation, predicted)}."
    )


def _verdict(confirmation: Mapping[str, Any], predicted: float) -> str:
    """The verdict's words; a confirmed crossing whose measured ratio is, beyond its
    interval, larger or smaller than the fits' says so: the side is right, the place of
    the crossing is not where the fits put it."""
    bounds = confirmation["interval"]
    if confirmation["verdict"] != "confirmed" or not bounds:
        return VERDICT[confirmation["verdict"]]
    if bounds[0] > predicted:
        return "the side predicted, by more than the fits say (the crossing lies lower)"
    if bounds[1] < predicted:
        return "the side predicted, by less than the fits say (the crossing lies higher)"
    return VERDICT["confirmed"]


def _trend_text(trend: Mapping[str, Any], axis: str) -> str:
    span = f"from {axis} = {_units(trend['start'])} to {_units(trend['stop'])}"
    low, high = trend["ratio_low"], trend["ratio_high"]
    between = f"{_ratio(low)[:-1]}–{_ratio(high)}"
    flips = trend.get("flips") or []
    if flips:
        where = " and again between ".join(f"{_units(a)} and {_units(b)}" for a, b in flips)
        return (
            f"the measured order of {trend['ahead']} and {trend['behind']} changes between "
            f"{axis} = {where} ({between} apart {span}), although their fits do not cross "
            "there: see the plot"
        )
    if low < 1:
        return (
            f"{trend['ahead']} and {trend['behind']} do not cross and stay within "
            f"{between} of each other {span}"
        )
    text = f"{trend['ahead']} stays {between} ahead of {trend['behind']} {span}"
    first, last = trend["ratio_first"], trend["ratio_last"]
    if last > 1.25 * first:
        text += f" (widening from {_ratio(first)} to {_ratio(last)})"
    elif first > 1.25 * last:
        text += f" (narrowing from {_ratio(first)} to {_ratio(last)})"
    return text


def own_sentence(analysis: Mapping[str, Any]) -> str | None:
    """What the sweep says at the base size's own value: "At population = 64 (size
    default, measured) scanned is fastest (2.1 ms; vmapped 3.3 ms); ..."."""
    own, sweep = analysis.get("own"), analysis["sweep"]
    if not own or not own["fastest"]:
        return None
    axis, fastest, units = sweep["axis"], own["fastest"], own["units"]
    how = "measured" if own["measured"] else "from the fits"
    if not own["inside"]:
        how += ", outside the measured points"
    others = sorted((t, name) for name, t in own["times_s"].items() if name != fastest)
    rivals = "; ".join(f"{name} {format_seconds(t)}" for t, name in others[:3])
    text = (
        f"At {axis} = {units} (size {own['size']}, {how}) {fastest} is fastest "
        f"({format_seconds(own['times_s'][fastest])}" + (f"; {rivals})" if rivals else ")")
    )
    held = [  # the crossovers a measurement did not contradict
        c
        for c in analysis["crossovers"]
        if (c.get("confirmation") or {}).get("verdict") != "contradicted"
    ]
    later = sorted((c["at"], c["above"]) for c in held if c["below"] == fastest and c["at"] > units)
    earlier = sorted(
        (c["at"], c["below"]) for c in held if c["above"] == fastest and c["at"] <= units
    )
    if earlier:
        at, name = earlier[-1]
        text += f"; below {axis} = {math.ceil(at - 1e-9):,}, {name} is"
    if later:
        at, name = later[0]
        text += f"; from {axis} >= {math.ceil(at - 1e-9):,} on, {name}"
    return text + "."


def _skipped(analysis: Mapping[str, Any], axis: str) -> list[str]:
    lines = []
    for line in analysis["lines"]:
        for point in line["points"]:
            if point["status"] != "ok":
                where = f"{line['label']} at {axis} = {point['units']}"
                lines.append(f"{where}: {point['status']}: {point['note']}")
    return lines


def _share(part: float, whole: float) -> str:
    return f" ({part / whole:.0%})" if whole > 0 and part >= 0 else ""


def _explained(analysis: Mapping[str, Any]) -> list[str]:
    """Per backend with a k = 1 fit and priced counts: how much of its fitted fixed and
    per-unit cost the counts x unit costs explain (the rest: the host's own work, the
    device's, or what no probe names)."""
    unit = _singular(analysis["sweep"]["unit"])
    found = []
    for line in analysis["lines"]:
        fit, priced = line["fit"], line["priced"]
        if fit is None or priced is None or fit["exponent_fitted"]:
            continue
        fixed, per = max(priced["fixed_s"], 0.0), max(priced["per_unit_s"], 0.0)
        found.append(
            f"{line['label']}: its counts x the unit costs (dispatches, launches, "
            f"transfers, waits) account for {_seconds(fixed)} of its "
            f"{format_seconds(fit['fixed_s'])} fixed cost per call{_share(fixed, fit['fixed_s'])}"
            f" and {_seconds(per)} of its {format_seconds(fit['per_unit_s'])} per {unit}"
            f"{_share(per, fit['per_unit_s'])}"
        )
    return found


def _notes(analysis: Mapping[str, Any], axis: str) -> list[str]:
    notes = []
    for line in analysis["lines"]:
        fit = line["fit"] or {}
        if fit.get("rough"):
            notes.append(
                f"{line['label']}: a rough fit (off by {fit['rms']:.0%} RMS): its cost per "
                f"unit changes along {axis} (a working set leaving a cache level, another "
                "code path) or its points were disturbed; one curve does not describe it"
            )
        busy = [p["units"] for p in line["points"] if p.get("disturbed")]
        if busy:
            where = ", ".join(str(units) for units in busy)
            notes.append(
                f"{line['label']}: measured while the machine was busy at {axis} = {where}"
            )
        scaled = [p for p in line["points"] if p["status"] == "ok" and p["scaled"]]
        if scaled:
            where = ", ".join(f"{p['units']} ({p['scaled']})" for p in scaled)
            notes.append(
                f"{line['label']}: ≈ measured on part of the work and scaled at {axis} = {where}"
                + (
                    "; not fitted"
                    if any(not p["fitted"] and not p["added"] for p in scaled)
                    else ""
                )
            )
        if line["fit"] is None:
            notes.append(f"{line['label']}: no fit (fewer than 2 points measured)")
    return notes


def growth_sections(runs: Sequence[Run]) -> list[GrowthSection]:
    """Every stored sweep analysis of ``runs``; a malformed one becomes a note."""
    sections = []
    for index, run in enumerate(runs):
        growth = run.invocation.growth
        if growth is None:
            continue
        if growth.error:
            sections.append(_unreadable(index, growth.error))
        for analysis in growth.analysis:
            try:
                sections.append(_section(index, analysis, len(runs) > 1))
            except (KeyError, TypeError, ValueError, IndexError) as error:
                why = f"the stored growth analysis cannot be read ({type(error).__name__}: {error})"
                sections.append(_unreadable(index, why))
    return sections


def _rough_lines(analysis: Mapping[str, Any]) -> set[str]:
    return {line["label"] for line in analysis["lines"] if (line["fit"] or {}).get("rough")}


def _section(run: int, analysis: Mapping[str, Any], several: bool) -> GrowthSection:
    sweep = analysis["sweep"]
    axis = sweep["axis"]
    title = (
        f"{sweep['scenario']} along {axis} from {sweep['base']} ({axis} = "
        f"{_units(min(sweep['values']))}–{_units(max(sweep['values']))}, {sweep['dtype']})"
    )
    title += f" (run {run})" if several else ""
    return GrowthSection(
        title=title,
        run=run,
        scenario=sweep["scenario"],
        base=sweep["base"],
        axis=axis,
        fits=_fits_table(analysis),
        crossovers=tuple(
            _crossover_text(c, axis, _rough_lines(analysis)) for c in analysis["crossovers"]
        ),
        trends=tuple(_trend_text(t, axis) for t in analysis["trends"]),
        own=own_sentence(analysis),
        skipped=tuple(_skipped(analysis, axis)),
        notes=tuple(_explained(analysis) + _notes(analysis, axis)),
        analysis=analysis,
    )


def _unreadable(run: int, why: str) -> GrowthSection:
    return GrowthSection(
        title=f"growth analysis of run {run}",
        run=run,
        scenario="",
        base="",
        axis="",
        fits=pd.DataFrame(),
        crossovers=(),
        trends=(),
        own=None,
        skipped=(),
        notes=(why,),
        analysis={},
    )


def own_sentences(sections: Sequence[GrowthSection]) -> dict[tuple[int, str, str], list[str]]:
    """(run, scenario, base size) -> the sweeps' sentences about that size (the
    diagnosis of its table)."""
    found: dict[tuple[int, str, str], list[str]] = {}
    for section in sections:
        if section.own:
            found.setdefault((section.run, section.scenario, section.base), []).append(section.own)
    return found

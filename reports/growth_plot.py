"""The log-log plot of a grown run's sweep (`GrowthSection.plot`): time per call against
the axis, one line per backend, read from the stored analysis as
`scanbench.reports.growth_section` reads it for text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from scanbench.units import format_seconds, number

from .plots import MARKERS, Plot, _color, _log_axis


def _errorbars(axes, points: Sequence[Mapping[str, Any]], **style: Any) -> None:
    """Medians with their 95% intervals (a point without an interval: the median alone)."""
    ys = [p["median_s"] for p in points]
    low = [
        y - (p["low_s"] if p["low_s"] is not None else y) for p, y in zip(points, ys, strict=True)
    ]
    high = [
        (p["high_s"] if p["high_s"] is not None else y) - y for p, y in zip(points, ys, strict=True)
    ]
    axes.errorbar([p["units"] for p in points], ys, yerr=[low, high], linestyle="none",
                  capsize=3, **style)  # fmt: skip


def _draw_line(axes, line: Mapping[str, Any], grid: np.ndarray, marker: str) -> None:
    """One backend: its points (hollow when added), skipped points at their prediction
    (x), its fit (dashed)."""
    color = _color(line["strategy"])  # by strategy, as the other plots; markers tell apart
    ok = [p for p in line["points"] if p["status"] == "ok" and p["median_s"]]
    swept, added = [p for p in ok if not p["added"]], [p for p in ok if p["added"]]
    if swept:
        _errorbars(axes, swept, color=color, marker=marker, label=line["label"])
    if added:
        _errorbars(axes, added, color=color, marker=marker, markerfacecolor="none")
    skipped = [p for p in line["points"] if p["predicted_s"]]
    if skipped:
        xs, ys = [p["units"] for p in skipped], [p["predicted_s"] for p in skipped]
        axes.plot(xs, ys, color=color, marker="x", linestyle="none", alpha=0.5)
    fit = line["fit"]
    if fit is not None:
        curve = fit["fixed_s"] + fit["per_unit_s"] * grid ** fit["exponent"]
        axes.plot(grid, curve, color=color, linestyle="--", alpha=0.7, linewidth=1)


def _draw_crossover(axes, crossover: Mapping[str, Any]) -> None:
    """A crossing: dotted at the fits' crossing, its interval shaded; grey when the
    measurement there contradicted it."""
    contradicted = (crossover.get("confirmation") or {}).get("verdict") == "contradicted"
    color = "#999999" if contradicted else "black"
    axes.axvline(crossover["at"], color=color, linestyle=":", linewidth=1)
    if crossover["interval"]:
        axes.axvspan(*crossover["interval"], color=color, alpha=0.08)
    label = f"{crossover['above']} from {crossover['confirm_at']:,}"
    axes.annotate(label + (" (contradicted)" if contradicted else ""), (crossover["at"], 1.0),
                  xycoords=("data", "axes fraction"), rotation=90, va="top", ha="right",
                  fontsize="small", color=color)  # fmt: skip


def growth_plot(analysis: Mapping[str, Any], title: str) -> Plot | None:
    """Time per call against the axis (log-log), one line per backend: the points with
    their 95% intervals, the fits (dashed), the added points (hollow), the points the
    budget skipped at their prediction (x), the crossovers (dotted, interval shaded)."""
    if not analysis or not analysis.get("lines"):
        return None
    sweep = analysis["sweep"]
    figure = Figure(figsize=(8.5, 4.8), layout="constrained")
    axes = figure.add_subplot()
    units = [p["units"] for line in analysis["lines"] for p in line["points"]]
    grid = np.geomspace(max(min(units) / 1.5, 0.5), max(units) * 1.5, 200)
    strategies: list[str] = []
    for line in analysis["lines"]:
        _draw_line(axes, line, grid, MARKERS[strategies.count(line["strategy"]) % len(MARKERS)])
        strategies.append(line["strategy"])
    for crossover in analysis["crossovers"]:
        _draw_crossover(axes, crossover)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.xaxis.set_minor_locator(NullLocator())
    values = sorted(sweep["values"])  # the sweep's own points (added ones sit between)
    axes.set_xticks(values, [number(v).replace(" ", "") for v in values])
    _log_axis(axes.yaxis, format_seconds)
    axes.set_xlabel(f"{sweep['axis']} ({sweep['unit']}; log scale)")
    axes.set_ylabel("median time per call (log scale)")
    axes.grid(True, which="major", alpha=0.3)
    axes.legend(loc="upper left", bbox_to_anchor=(1.02, 1), fontsize="small", title="backend")
    found = [
        f"{c['above']} beats {c['below']} from {sweep['axis']} >= {c['confirm_at']:,}"
        for c in analysis["crossovers"]
        if (c.get("confirmation") or {}).get("verdict") != "contradicted"
    ]
    caption = (
        ("; ".join(found) + ". " if found else "No crossing held in the swept range. ")
        + "Points: medians with their 95% intervals (hollow: measured to check a crossover, "
        "not fitted; x: skipped over the budget, at its predicted time). Dashed: the fitted "
        "fixed + per unit x units^k. Dotted: where two fits cross (shaded: its interval)."
    )
    return Plot(f"Growth: {title}", caption, figure)

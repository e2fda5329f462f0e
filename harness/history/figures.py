"""The dashboard's figures, as inline SVG whose points link to their commits.

Per cell: the median time by commit with its interval, one colour per series, the fitted
levels and a dashed line at each change point (labelled with its factor); and, for the
counts that change, one step line per count and series with each change annotated by its
commit and values. The x axis is the cell's commits in order (short shas, each a link when
the remote is known). `matplotlib.figure.Figure` only (no pyplot, no global state).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

import matplotlib as mpl
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from .changes import SeriesChanges
from .entry import Commit
from .series import commit_url
from .summary import number, seconds

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
MAX_TICKS = 40
LOG_ABOVE = 4.0  # a time axis is logarithmic when its medians span more than this factor


def color(index: int) -> str:
    return COLORS[index % len(COLORS)]


def svg(figure: Figure) -> str:
    """The figure as an ``<svg>`` element to put inline (text kept as text; matplotlib
    salts its element ids per figure, so several figures share a page)."""
    buffer = io.StringIO()
    with mpl.rc_context({"svg.fonttype": "none"}):
        figure.savefig(buffer, format="svg")
    text = buffer.getvalue()
    return '<svg role="img" class="plot" ' + text[text.index("<svg") + len("<svg ") :]


class Axis:
    """The x axis of one cell: the timeline positions of its commits, in order."""

    def __init__(self, commits: Sequence[Commit], positions: Sequence[int]):
        self.commits = [commits[p] for p in positions]
        self.x = {position: x for x, position in enumerate(positions)}

    def url(self, commit: Commit) -> str | None:
        return commit_url(commit.remote, commit.sha)

    def draw(self, axes) -> None:
        """Short shas as tick labels (at most `MAX_TICKS`), each linked to its commit."""
        step = max(1, math.ceil(len(self.commits) / MAX_TICKS))
        ticks = list(range(0, len(self.commits), step))
        axes.set_xlim(-0.7, len(self.commits) - 0.3)
        axes.set_xticks(ticks, [self.commits[t].short for t in ticks])
        axes.tick_params(axis="x", labelrotation=90, labelsize=7)
        for tick, position in zip(axes.xaxis.get_major_ticks(), ticks, strict=False):
            tick.label1.set_fontfamily("monospace")
            tick.label1.set_url(self.url(self.commits[position]))
        axes.grid(axis="y", alpha=0.3)


def _series_times(axes, axis: Axis, changes: SeriesChanges, tint: str, row: int = 0) -> None:
    """One series' medians, levels and change points (``row``: its labels' line, so that
    two series changing at one commit do not print over each other)."""
    timed = [p for p in changes.series.points if p.cell.timed]
    if not timed:
        return
    xs = [axis.x[p.position] for p in timed]
    medians = [p.cell.median for p in timed]
    below = [max(p.cell.median - (p.cell.ci_low or p.cell.median), 0.0) for p in timed]
    above = [max((p.cell.ci_high or p.cell.median) - p.cell.median, 0.0) for p in timed]
    axes.errorbar(xs, medians, yerr=[below, above], fmt="none", ecolor=tint, alpha=0.6)
    faces = ["white" if p.cell.disturbed else tint for p in timed]
    dots = axes.scatter(
        xs, medians, s=18, c=faces, edgecolors=tint, zorder=3, label=changes.series.line.short
    )
    dots.set_urls([axis.url(p.commit) for p in timed])
    for first, last, level in changes.times.segments:
        axes.hlines(level, axis.x[first] - 0.3, axis.x[last] + 0.3, colors=tint, linewidth=1)
    for change in changes.times.changes:
        x = axis.x[change.position] - 0.5
        axes.axvline(x, color=tint, linestyle="--", linewidth=1)
        axes.annotate(
            f"{change.factor:.2f}x",
            (x, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(2, -10 - 10 * row),
            textcoords="offset points",
            color=tint,
            fontsize=8,
        )


def _interval(found: Sequence[SeriesChanges]) -> str:
    """``95% interval`` when every timed point has that confidence, else ``interval``."""
    levels = {p.cell.confidence for ch in found for p in ch.series.points if p.cell.timed}
    level = levels.pop() if len(levels) == 1 else None
    return "interval" if level is None or not 0 < level < 1 else f"{level:.0%} interval"


def time_figure(cell: str, found: Sequence[SeriesChanges], axis: Axis) -> Figure:
    """Median and interval by commit per series (hollow: measured while the machine was
    busy, left out of the fit), fitted levels, change points."""
    figure = Figure(figsize=(9.0, 3.2), layout="constrained")
    axes = figure.add_subplot()
    for index, changes in enumerate(found):
        _series_times(axes, axis, changes, color(index), row=index)
    medians = [p.cell.median for ch in found for p in ch.series.points if p.cell.timed]
    if medians and max(medians) > LOG_ABOVE * min(medians):  # machines apart, big steps
        axes.set_yscale("log")
        axes.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        axes.yaxis.set_minor_formatter(NullFormatter())
    axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: seconds(value)))
    axes.set_ylabel("median time per call", fontsize=8)
    axes.set_title(f"{cell}: time by commit (median, {_interval(found)})", fontsize=10)
    axis.draw(axes)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, title="series")
    return figure


def _series_counts(panel, axis: Axis, changes: SeriesChanges, key: str, tint: str) -> None:
    points = [p for p in changes.series.points if p.cell.status == "ok" and key in p.cell.counts]
    if not points:
        return
    xs = [axis.x[p.position] for p in points]
    values = [p.cell.counts[key] for p in points]
    panel.step(
        [*xs, len(axis.commits) - 0.3],
        [*values, values[-1]],
        where="post",
        color=tint,
        label=changes.series.line.short,
    )
    dots = panel.scatter(xs, values, s=8, color=tint, zorder=3)
    dots.set_urls([axis.url(p.commit) for p in points])
    for change in changes.counts:
        if change.key == key:
            x = axis.x[change.position]
            text = f"{axis.commits[x].short}: {number(change.before)}→{number(change.after)}"
            panel.annotate(
                text,
                (x, change.after),
                xytext=(3, 4),
                textcoords="offset points",
                fontsize=7,
                color=tint,
            )


def counts_figure(
    cell: str, found: Sequence[SeriesChanges], axis: Axis, keys: Sequence[str]
) -> Figure:
    """One panel per count of ``keys``: a step line per series, each change annotated
    with its commit and values."""
    figure = Figure(figsize=(9.0, 0.8 + 1.5 * len(keys)), layout="constrained")
    panels = figure.subplots(len(keys), 1, sharex=True, squeeze=False)[:, 0]
    for panel, key in zip(panels, keys, strict=True):
        for index, changes in enumerate(found):
            _series_counts(panel, axis, changes, key, color(index))
        panel.set_ylabel(key, fontsize=8)
        panel.margins(y=0.4)
        axis.draw(panel)
    panels[0].set_title(f"{cell}: counts per call by commit (exact)", fontsize=10)
    panels[0].legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, title="series")
    return figure

"""The changes of a history in words: one row per change (newest first), how each is said,
and the markdown summary (`markdown`, for a CI job summary or a PR comment). The HTML
dashboard (`scanbench.history.dashboard`) shows the same rows.

Example:
    >>> seconds(0.00123)
    '1.23 ms'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

from .changes import MIN_POINTS, CountChange, SeriesChanges, TimeChange
from .entry import CellPoint, Commit
from .pytest_json import SOURCE as PYTEST_SOURCE
from .series import Line, Timeline, commit_url

MARKDOWN_ROWS = 200  # a job summary is cut at 1 MiB: the rest of the rows are counted


def seconds(value: float) -> str:
    """A time with three significant digits and its unit (rounded first: 999.6 us is
    ``1 ms``)."""
    value = float(f"{value:.3g}")
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def number(value: float) -> str:
    return f"{value:g}" if float(value).is_integer() else f"{value:.4g}"


@dataclasses.dataclass(frozen=True)
class Row:
    """One detected change of one cell in one series."""

    commit: Commit
    previous: Commit
    position: int
    cell: str
    line: Line
    time: TimeChange | None = None
    count: CountChange | None = None
    source: str = ""  # the cell's scenario source, for the bisect command
    point: CellPoint | None = None  # the cell as last measured in the series

    @property
    def adjacent(self) -> bool:
        """Whether the previous measured commit is this commit's parent (the change is
        at this commit, not somewhere between the two)."""
        return self.previous.sha in self.commit.parents


def rows(timeline: Timeline, detected: Mapping[str, Sequence[SeriesChanges]]) -> list[Row]:
    """Every change, newest commit first (counts before times at one commit)."""
    out = []
    for cell, all_series in detected.items():
        for found in all_series:
            line, point = found.series.line, found.series.points[-1].cell
            for change in (*found.counts, *found.times.changes):
                before, after = timeline.commits[change.previous], timeline.commits[change.position]
                kind = "count" if isinstance(change, CountChange) else "time"
                found_change = {kind: change, "source": point.source, "point": point}
                out.append(Row(after, before, change.position, cell, line, **found_change))
    return sorted(out, key=lambda r: (-r.position, r.time is not None, r.cell, r.line.name))


def what(row: Row) -> str:
    """The change in words: ``1.30x slower: 8.03 ms -> 10.4 ms`` or ``dispatches 202 ->
    303 per call (+101; solve_step 0 -> 101)``."""
    if row.time is not None:
        factor = row.time.factor
        how = f"{factor:.2f}x slower" if factor >= 1 else f"{1 / factor:.2f}x faster"
        return f"time {how}: {seconds(row.time.before_s)} -> {seconds(row.time.after_s)}"
    change = row.count
    difference = change.after - change.before
    text = f"{change.key} {number(change.before)} -> {number(change.after)} per call"
    parts = [f"{difference:+g}"]
    parts += [f"{name} {number(a)} -> {number(b)}" for name, a, b in change.parts[:3]]
    if len(change.parts) > 3:
        parts.append(f"{len(change.parts) - 3} more")
    return f"{text} ({'; '.join(parts)})"


def scenario_argument(name: str, source: str, root: Path | None = None) -> str:
    """How to name a cell's scenario to ``scanbench bisect``: a bundled scenario by its
    name, a scenario file by its path relative to ``root`` (the directory the command
    will run in) when it is inside it."""
    target, _, attribute = source.rpartition(":")
    if not source or not target.endswith(".py"):
        return name
    path = Path(target)
    if root is not None and path.is_absolute() and path.is_relative_to(root):
        path = path.relative_to(root)
    return f"{path}:{attribute}"


def where(row: Row, root: Path | None = None) -> str:
    """At this commit, or somewhere after the previous measured one (with the bisect that
    finds it, run from ``root``)."""
    if row.adjacent:
        return ""
    if row.source == PYTEST_SOURCE:  # measured by a test: no scenario for `bisect`
        return (
            f"first seen here; the previous measured commit is {row.previous.short}: run "
            f"the test with --benchmark-json at the commits between them, or `git bisect "
            f"run` it asserting the count"
        )
    scenario, backend, size = row.cell.split("/")[:3]
    cell = f"{scenario_argument(scenario, row.source, root)}/{backend.split('[')[0]}/{size}"
    point = row.point
    dtype = f" --dtype {point.dtype}" if point is not None else ""
    text = (
        f"first seen here; the previous measured commit is {row.previous.short}: "
        f"`scanbench bisect {row.previous.short} {row.commit.short} --cell {cell}{dtype}` "
        "finds it"
    )
    if point is not None and (point.params or point.devices is not None or point.seed):
        text += " (it measures the backend's default parameters, devices and seed 0)"
    return text


def not_enough(detected: Mapping[str, Sequence[SeriesChanges]]) -> list[tuple[str, Line, str]]:
    """(cell, line, how many points it has) of every series too short for change points."""
    return [
        (cell, found.series.line, timed_points(found.times.points, found.times.left_out))
        for cell, all_series in detected.items()
        for found in all_series
        if found.times.fit is None
    ]


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def timed_points(points: int, left_out: int) -> str:
    """``5 timed commits`` (and how many were left out: measured on a busy machine)."""
    text = plural(points, "timed commit")
    return text + (f" ({left_out} more measured while the machine was busy)" if left_out else "")


def hints(found: Sequence[Row], root: Path | None) -> list[str]:
    """`where` of each row, said once per commit, cell and series."""
    seen, out = set(), []
    for row in found:
        key = (row.position, row.previous.sha, row.cell, row.line.name)
        out.append("" if key in seen else where(row, root))
        seen.add(key)
    return out


def _md_commit(commit: Commit) -> str:
    url = commit_url(commit.remote, commit.sha)
    subject = commit.subject.replace("|", "\\|")[:60]
    return (f"[`{commit.short}`]({url})" if url else f"`{commit.short}`") + f" {subject}"


def span(timeline: Timeline) -> str:
    """``36 commits (abc1234 .. def5678), 72 runs`` and what the history holds."""
    first, last = timeline.commits[0], timeline.commits[-1]
    runs = sum(len(s.points) for all_series in timeline.cells.values() for s in all_series)
    return (
        f"{plural(len(timeline.commits), 'commit')} ({first.short} .. {last.short}), "
        f"{plural(len(timeline.cells), 'cell')}, {len(timeline.lines)} series, "
        f"{plural(runs, 'point')}"
    )


def markdown(
    timeline: Timeline, detected: Mapping[str, Sequence[SeriesChanges]], root: Path | None = None
) -> str:
    """The summary: span, series, changes newest first, short series, skipped files
    (``root``: where the bisect commands it suggests are to be run)."""
    found = rows(timeline, detected)
    lines = [f"## scanbench history: {len(found)} changes", ""]
    if not timeline.commits:
        return "\n".join([*lines, "The history holds no run.", ""])
    lines += [
        span(timeline) + ".",
        "",
        "| series | machine, environment, branch |",
        "| --- | --- |",
    ]
    lines += [f"| {line.name} | {line.label} |" for line in timeline.lines]
    lines.append("")
    if found:
        lines += ["| commit | cell | series | change |", "| --- | --- | --- | --- |"]
        for row, hint in zip(found[:MARKDOWN_ROWS], hints(found, root), strict=False):
            text = what(row) + (f"; {hint}" if hint else "")
            lines.append(f"| {_md_commit(row.commit)} | {row.cell} | {row.line.name} | {text} |")
        if len(found) > MARKDOWN_ROWS:
            lines.append(f"\n... and {len(found) - MARKDOWN_ROWS} older changes (the HTML has all)")
    else:
        lines.append("No change: every count constant, no change point in any time.")
    short = not_enough(detected)
    if short:
        lines += ["", f"Not enough points for change points (they need {MIN_POINTS} commits):"]
        lines += [f"- {cell} on {line.name}: {points}" for cell, line, points in short]
    if timeline.skipped:
        lines += ["", "Skipped files:"]
        lines += [f"- {path}: {reason}" for path, reason in timeline.skipped]
    return "\n".join([*lines, ""])

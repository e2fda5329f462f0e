"""The static dashboard of a history: one self-contained HTML page (no network, no
script; CSS inline, figures inline SVG whose points and tick labels link to their
commits when the remote is known).

Sections: what the history holds and its series (machine, environment, branch: never
mixed), the detected changes newest first, then per cell its time figure (median and
interval by commit, fitted levels, change points), its counts (a step figure of those
that change, the constant ones in words), notes (noise, "not enough points", failures)
and the numbers behind the figure; the skipped files; how changes are found.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from .changes import COUNTED, MIN_FACTOR, MIN_POINTS, MIN_SIZE, PENALTY_SCALE, SeriesChanges
from .entry import Commit
from .figures import Axis, counts_figure, svg, time_figure
from .series import Timeline, commit_url
from .summary import Row, hints, number, plural, rows, seconds, span, timed_points, what

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1250px; color: #222; }
h1, h2, h3 { font-weight: 600; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; }
table { border-collapse: collapse; font-size: 0.85em; margin: .5em 0 1em; }
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } code { font-size: 0.95em; }
svg.plot { max-width: 100%; height: auto; display: block; margin: .5em 0; }
.note { color: #555; font-size: 0.85em; max-width: 75em; } .problem { color: #a00; }
.slower { color: #a00; } .faster { color: #070; }
"""


def _esc(text: object) -> str:
    return html.escape(str(text))


def anchor(cell: str) -> str:
    return "cell-" + re.sub(r"[^A-Za-z0-9]+", "-", cell).strip("-")


def _commit(commit: Commit, subject: bool = True) -> str:
    url = commit_url(commit.remote, commit.sha)
    code = f"<code>{_esc(commit.short)}</code>"
    link = f'<a href="{_esc(url)}">{code}</a>' if url else code
    return link + (f" {_esc(commit.subject[:70])}" if subject else "")


def _changes_table(found: Sequence[Row], root: Path | None) -> list[str]:
    if not found:
        return ["<p>No change: every count constant, no change point in any time.</p>"]
    out = [
        "<table><tr><th>commit</th><th>date</th><th>cell</th><th>series</th><th>change</th></tr>"
    ]
    for row, hint in zip(found, hints(found, root), strict=True):
        css = ""
        if row.time is not None:
            css = ' class="slower"' if row.time.factor > 1 else ' class="faster"'
        note = f'<br><span class="note">{_esc(hint)}</span>' if hint else ""
        out.append(
            f"<tr><td>{_commit(row.commit)}</td><td>{_esc((row.commit.date or '')[:10])}</td>"
            f'<td><a href="#{anchor(row.cell)}">{_esc(row.cell)}</a></td>'
            f"<td>{_esc(row.line.name)}</td><td{css}>{_esc(what(row))}{note}</td></tr>"
        )
    return [*out, "</table>"]


def _notes(found: Sequence[SeriesChanges]) -> list[str]:
    out = []
    for changes in found:
        name, times = changes.series.line.name, changes.times
        if times.fit is None:
            text = (
                f"{name}: {timed_points(times.points, 0)}: not enough points for change "
                f"points (they need {MIN_POINTS})"
            )
        else:
            text = (
                f"{name}: {plural(times.points, 'timed commit')}, commit-to-commit noise "
                f"{times.fit.noise:.1%}, {plural(len(times.changes), 'change point')}"
            )
        if times.left_out:
            text += f"; {times.left_out} measured while the machine was busy (hollow, left out)"
        failed = [p for p in changes.series.points if p.cell.status != "ok"]
        if failed:
            text += "; " + ", ".join(f"{p.cell.status} at {p.commit.short}" for p in failed[:5])
        out.append(f"<li>{_esc(text)}</li>")
    return ["<ul class='note'>", *out, "</ul>"]


def _counts(cell: str, found: Sequence[SeriesChanges], axis: Axis) -> list[str]:
    changing = sorted(
        {c.key for changes in found for c in changes.counts},
        key=lambda key: (
            min(c.position for ch in found for c in ch.counts if c.key == key),
            COUNTED.index(key),
        ),
    )
    out = [svg(counts_figure(cell, found, axis, changing))] if changing else []
    constant = []
    for changes in found:
        latest = next((p for p in reversed(changes.series.points) if p.cell.counts), None)
        if latest is None:
            continue
        same = [f"{k} {number(v)}" for k, v in latest.cell.counts.items() if k not in changing]
        same = [text for text in same if not text.split()[0].endswith("_bytes")]
        if same:
            constant.append(f"{changes.series.line.name}: {', '.join(same)}")
    if constant:
        out.append(
            f"<p class='note'>Counts per call constant along the history: "
            f"{_esc('; '.join(constant))}.</p>"
        )
    return out


def _numbers(found: Sequence[SeriesChanges], axis: Axis) -> list[str]:
    """The numbers behind the figures: per commit and series, median [interval]."""
    names = [changes.series.line.name for changes in found]
    table = {}
    for column, changes in enumerate(found):
        for point in changes.series.points:
            cell = point.cell
            text = (
                f"{seconds(cell.median)} [{seconds(cell.ci_low or cell.median)}, "
                f"{seconds(cell.ci_high or cell.median)}]"
                if cell.timed
                else cell.status
            )
            text += " (busy)" if cell.disturbed else ""
            table.setdefault(point.position, [""] * len(found))[column] = text
    head = "".join(f"<th>{_esc(name)}</th>" for name in names)
    out = ["<details><summary>numbers</summary>", f"<table><tr><th>commit</th>{head}</tr>"]
    for position in sorted(table, reverse=True):
        commit = axis.commits[axis.x[position]]
        cells = "".join(f"<td>{_esc(text)}</td>" for text in table[position])
        out.append(f"<tr><td>{_commit(commit)}</td>{cells}</tr>")
    return [*out, "</table></details>"]


def _cell(cell: str, found: Sequence[SeriesChanges], timeline: Timeline) -> list[str]:
    positions = sorted({p.position for changes in found for p in changes.series.points})
    axis = Axis(timeline.commits, positions)
    out = [f'<section id="{anchor(cell)}"><h3>{_esc(cell)}</h3>']
    out += _notes(found)
    if any(p.cell.timed for changes in found for p in changes.series.points):
        out.append(svg(time_figure(cell, found, axis)))
    out += _counts(cell, found, axis)
    out += _numbers(found, axis)
    return [*out, "</section>"]


def method(min_factor: float = MIN_FACTOR) -> str:
    """How changes are found, in words (``min_factor``: ``--min-change``)."""
    return (
        "Counts per call are exact: a count that differs from the previous measured commit's "
        "is reported at that commit, with the breakdown entries that changed. Times: change "
        "points of the log median times found by PELT (ruptures, l1 cost, segments of at "
        f"least {MIN_SIZE} commits, so a step at the newest commit shows once one more commit "
        f"is measured; penalty {PENALTY_SCALE:g} x the Laplace BIC penalty with the noise "
        "estimated from the series), each kept only if it moves the level by at least "
        f"{(min_factor - 1) * 100:.3g}% and the intervals on either side separate; a series needs "
        f"{MIN_POINTS} timed commits, not counting those measured while the machine was busy. "
        "Series never mix machines, environments or branches. Stored history is for trends "
        "and for finding commits; the gate compares times only within one job."
    )


def page(
    timeline: Timeline,
    detected: Mapping[str, Sequence[SeriesChanges]],
    title: str,
    root: Path | None = None,
    min_factor: float = MIN_FACTOR,
) -> str:
    """The whole HTML page (see the module doc; ``root``: where the bisect commands it
    suggests are to be run; ``min_factor``: what `changes.detect` was given)."""
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_esc(title)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{_esc(title)}</h1>",
    ]
    if not timeline.commits:
        return "\n".join([*out, "<p>The history holds no run.</p></body></html>"])
    out += [f"<p>{_esc(span(timeline))}.</p>", f"<p class='note'>{_esc(method(min_factor))}</p>"]
    out += ["<h2>Series</h2>", "<table><tr><th>series</th><th>machine · environment · branch"]
    out[-1] += "</th></tr>"
    out += [f"<tr><td>{_esc(ln.name)}</td><td>{_esc(ln.label)}</td></tr>" for ln in timeline.lines]
    out += ["</table>", "<h2>Detected changes, newest first</h2>"]
    out += _changes_table(rows(timeline, detected), root)
    out.append("<h2>Cells</h2>")
    for cell, found in detected.items():
        out += _cell(cell, found, timeline)
    if timeline.skipped:
        out += ["<h2>Skipped files</h2>", "<ul>"]
        out += [f"<li class='problem'>{_esc(p)}: {_esc(r)}</li>" for p, r in timeline.skipped]
        out.append("</ul>")
    return "\n".join([*out, "</body></html>"])

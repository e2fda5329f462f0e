"""Self-contained HTML report: the markdown report's tables plus plots, in one file.

No network and no external files: CSS is inline and every plot is an SVG data URI in an
``<img>``. Sections: at a glance (the winner of every table and what to change in its
slowest backend), then per scenario what the reader came for first: the time vs size plot
per device (two sizes or more), devices side by side when several devices measured the
same size, and per table (scenario / size / dtype / device) one bar per backend (its
speedup over the baseline, else its time) above the timing table; then the final archive
of each backend as a heatmap (quality-diversity cells that stored one,
`scanbench.ArchiveMap`), the counts table with the decomposition plot, what to change and
the memory table; the scenario's memory vs size plot closes it. Then what was not
compared, the environments and the column help.
"""

from __future__ import annotations

import html
import re

import pandas as pd

from . import plots
from .growth_section import GrowthSection
from .model import Report, Table

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1, h2, h3 { font-weight: 600; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; }
table { border-collapse: collapse; font-size: 0.85em; margin: .5em 0 1em; }
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: right; }
th { background: #f4f4f4; } td:first-child, th:first-child { text-align: left; }
figure { margin: 1em 0 2em; } figure img { max-width: 100%; height: auto; }
figcaption { font-size: 0.9em; color: #444; max-width: 60em; }
.problem { color: #a00; } .note { color: #555; font-size: 0.85em; max-width: 70em; }
"""


def _esc(text: object) -> str:
    return html.escape(str(text))


def _table(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, escape=True, border=0)


def _figure(plot: plots.Plot | None) -> list[str]:
    if plot is None:
        return []
    return [
        "<figure>",
        f'<img alt="{_esc(plot.title)}" src="{plot.data_uri()}">',
        f"<figcaption><b>{_esc(plot.title)}.</b> {_esc(plot.caption)}</figcaption>",
        "</figure>",
    ]


def _notes(notes, css: str = "problem") -> list[str]:
    if not notes:
        return []
    return ["<ul>", *(f'<li class="{css}">{_esc(note)}</li>' for note in notes), "</ul>"]


def _section(table: Table) -> list[str]:
    out = [f"<h3>{_esc(table.title)}</h3>"]
    if table.timing is not None:
        # what the reader came for first: one bar per backend (its speedup over the
        # baseline, else its time), then the timing table
        out += _figure(
            plots.speedup_bars(table.ok, table.title) or plots.time_bars(table.ok, table.title)
        )
        out.append(_table(table.timing))
        out += _notes(table.notes)
        for sweep in plots.parameter_sweeps(table.ok, table.title):
            out += _figure(sweep)
    out += _figure(plots.archive_heatmaps(table.ok, table.title))  # counted-only cells too
    if table.counts is not None:
        out += ["<p>Where the time goes (per call):</p>", _table(table.counts)]
        out += [f"<p>{_esc(note)}</p>" for note in table.linear_notes]
        out += _figure(plots.decomposition_bars(table.ok, table.title))
    if table.diagnoses:
        out.append("<p>What to change:</p><ul>")
        out += [f"<li><b>{_esc(b)}</b>: {_esc(text)}</li>" for b, text in table.diagnoses]
        out.append("</ul>")
    if table.memory is not None:
        out += ["<p>Memory (per call):</p>", _table(table.memory)]
        out += [f"<p>{_esc(note)}</p>" for note in table.memory_notes]
    problems = [f"<b>{_esc(b)}</b> {_esc(status)}: {_esc(e)}" for b, status, e in table.problems]
    if problems:
        out += ["<ul>", *(f'<li class="problem">{p}</li>' for p in problems), "</ul>"]
    return out


def _growth(section: GrowthSection) -> list[str]:
    """A sweep: its plot, fitted costs, crossovers, trends, the user's size, skipped points."""
    out = [f"<h2>Growth: {_esc(section.title)}</h2>"]
    out += _figure(section.plot())
    if not section.fits.empty:
        out += ["<p>Fitted time per call = fixed + per unit x units^k (95% intervals):</p>"]
        out.append(_table(section.fits))
    sentences = [*section.crossovers, *section.trends, *([section.own] if section.own else [])]
    out += _notes(sentences, "note")
    out += _notes([f"skipped or failed: {text}" for text in section.skipped])
    out += _notes(section.notes, "note")
    return out


def render(report: Report) -> str:
    """The HTML page of ``report`` (see the module docstring for its sections)."""
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>scanbench results</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>scanbench results</h1>",
    ]
    if report.frame.empty:
        out.append("<p>No records.</p>")
    if not report.glance.empty:
        out += ["<h2>At a glance</h2>", _table(report.glance)]
    for scenario, ok, scenario_tables in report.scenarios():
        out.append(f"<h2>{_esc(scenario)}</h2>")
        for dtype, rows in ok.groupby("dtype", sort=False):
            latest = rows.sort_values("run").drop_duplicates(
                ["backend", "size", "device"], keep="last"
            )
            out += _figure(plots.time_vs_size(latest, f"{scenario} / {dtype}"))
        for (size, dtype), rows in ok.groupby(["size", "dtype"], sort=False):
            out += _figure(plots.devices_side_by_side(rows, f"{scenario} / {size} / {dtype}"))
        for table in scenario_tables:
            out += _section(table)
        for dtype, rows in ok.groupby("dtype", sort=False):  # memory after the times
            latest = rows.sort_values("run").drop_duplicates(
                ["backend", "size", "device"], keep="last"
            )
            out += _figure(plots.memory_vs_size(latest, f"{scenario} / {dtype}"))
    for section in report.growth:
        out += _growth(section)
    for scaling in report.scaling:
        out += [f"<h2>Scaling: {_esc(scaling.title)}</h2>", _table(scaling.table)]
        out += _figure(plots.scaling(scaling.rows, scaling.title))
    if report.run_time is not None:
        out += ["<h2>Where the run's time went</h2>", _table(report.run_time)]
        out += [f"<p>{_esc(report.run_time_note)}</p>"] if report.run_time_note else []
    if report.apart:
        out += ["<h2>Not compared</h2>", "<ul>"]
        out += [f"<li>{_esc(item.what)}: {_esc(item.reason)}</li>" for item in report.apart]
        out.append("</ul>")
    out += ["<h2>Environment</h2>", "<ul>"]
    out += [f"<li>{_esc(line)}</li>" for line in report.environment]
    help_text = re.sub(r"\*([^*]+)\*", r"<i>\1</i>", _esc(report.column_help))  # italics
    out += ["</ul>", f'<p class="note">{help_text}</p>', "</body></html>"]
    return "\n".join(out)

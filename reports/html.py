"""Self-contained HTML report: the markdown report's tables plus plots, in one file.

No network and no external files: CSS is inline and every plot is an SVG data URI in an
``<img>``. Sections: at a glance (the winner of every table), then per scenario the time vs
size plot per device, per table (scenario / size / dtype / device) the speedup and
decomposition plots with the timing and counts tables, devices side by side when several
devices measured the same size; then what was not compared, the environments and the
column help.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

import pandas as pd

from harness.store import Run
from reports import plots
from reports.comparable import Apart, split_comparable
from reports.frame import records_frame
from reports.scaling import scaling_tables
from reports.tables import (
    COLUMN_HELP,
    at_a_glance,
    counts_table,
    disturbed_notes,
    environment_lines,
    linear_notes,
    memory_notes,
    memory_table,
    problems,
    run_time_table,
    scaled_notes,
    tables,
    timing_table,
    warmup_notes,
)

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


def _at_a_glance(frame: pd.DataFrame) -> list[str]:
    glance = at_a_glance(frame)
    return ["<h2>At a glance</h2>", _table(glance)] if not glance.empty else []


def render(runs: Sequence[Run], apart: Sequence[Apart] = (), mixed_versions: bool = False) -> str:
    """The HTML report of ``runs`` (see the module docstring for its sections)."""
    frame, not_compared = split_comparable(records_frame(runs), mixed_versions)
    apart = [*apart, *not_compared]
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>scanbench results</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>scanbench results</h1>",
    ]
    if frame.empty:
        out.append("<p>No records.</p>")
    out += _at_a_glance(frame)
    ok_all = frame[frame["status"] == "ok"] if not frame.empty else frame
    for scenario, scenario_rows in frame.groupby("scenario", sort=False) if not frame.empty else []:
        out.append(f"<h2>{_esc(scenario)}</h2>")
        ok = ok_all[ok_all["scenario"] == scenario]
        for dtype, rows in ok.groupby("dtype", sort=False):
            latest = rows.sort_values("run").drop_duplicates(
                ["backend", "size", "device"], keep="last"
            )
            out += _figure(plots.time_vs_size(latest, f"{scenario} / {dtype}"))
            out += _figure(plots.memory_vs_size(latest, f"{scenario} / {dtype}"))
        for (size, dtype), rows in ok.groupby(["size", "dtype"], sort=False):
            out += _figure(plots.devices_side_by_side(rows, f"{scenario} / {size} / {dtype}"))
        for title, group in tables(scenario_rows):
            out.append(f"<h3>{_esc(title)}</h3>")
            group_ok = group[group["status"] == "ok"]
            if not group_ok.empty:
                out.append(_table(timing_table(group_ok)))
                notes = disturbed_notes(group_ok) + scaled_notes(group_ok) + warmup_notes(group_ok)
                if notes:
                    out.append("<ul>")
                    out += [f'<li class="problem">{_esc(note)}</li>' for note in notes]
                    out.append("</ul>")
                out += _figure(plots.speedup_bars(group_ok, title))
                if group_ok["dispatches"].notna().any():
                    out.append("<p>Where the time goes (per call):</p>")
                    out.append(_table(counts_table(group_ok)))
                    out += [f"<p>{_esc(note)}</p>" for note in linear_notes(group_ok)]
                    out += _figure(plots.decomposition_bars(group_ok, title))
                if group_ok["mem_peak"].notna().any():
                    out.append("<p>Memory (per call):</p>")
                    out.append(_table(memory_table(group_ok)))
                    out += [f"<p>{_esc(note)}</p>" for note in memory_notes(group_ok)]
            failed = problems(group)
            if failed:
                out.append("<ul>")
                out += [
                    f'<li class="problem"><b>{_esc(backend)}</b> {_esc(status)}: {_esc(error)}</li>'
                    for backend, status, error in failed
                ]
                out.append("</ul>")
    for title, rows, table in scaling_tables(frame):
        out += [f"<h2>Scaling: {_esc(title)}</h2>", _table(table)]
        out += _figure(plots.scaling(rows, title))
    run_time = run_time_table(frame) if not frame.empty else None
    if run_time is not None and not run_time.empty:
        out += ["<h2>Where the run's time went</h2>", _table(run_time)]
    if apart:
        out += ["<h2>Not compared</h2>", "<ul>"]
        out += [f"<li>{_esc(item.what)}: {_esc(item.reason)}</li>" for item in apart]
        out.append("</ul>")
    out += ["<h2>Environment</h2>", "<ul>"]
    out += [f"<li>{_esc(line)}</li>" for line in environment_lines(runs)]
    help_text = re.sub(r"\*([^*]+)\*", r"<i>\1</i>", _esc(COLUMN_HELP))  # markdown italics
    out += ["</ul>", f'<p class="note">{help_text}</p>', "</body></html>"]
    return "\n".join(out)

"""Markdown report of stored runs (for terminals, CI summaries and PR comments)."""

from __future__ import annotations

from collections.abc import Sequence

from harness.store import Run
from reports.comparable import Apart, split_comparable
from reports.frame import records_frame
from reports.scaling import scaling_tables
from reports.tables import (
    COLUMN_HELP,
    at_a_glance,
    counts_table,
    disturbed_notes,
    environment_lines,
    format_seconds,
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

__all__ = ["format_seconds", "render"]


def render(runs: Sequence[Run], apart: Sequence[Apart] = (), mixed_versions: bool = False) -> str:
    """Per scenario, size, dtype and device: the timing table, the counts table, the failed
    and skipped cells; then what was not compared and why; then each run's environment."""
    frame, not_compared = split_comparable(records_frame(runs), mixed_versions)
    apart = [*apart, *not_compared]
    out = ["# scanbench results", ""]
    if frame.empty:
        out += ["No records.", ""]
    glance = at_a_glance(frame)
    if not glance.empty:
        out += ["## At a glance", ""]
        out += [glance.to_markdown(index=False, disable_numparse=True), ""]
    for title, group in tables(frame):
        out += [f"## {title}", ""]
        ok = group[group["status"] == "ok"]
        if not ok.empty:
            out += [timing_table(ok).to_markdown(index=False, disable_numparse=True), ""]
            notes = disturbed_notes(ok) + scaled_notes(ok) + warmup_notes(ok)
            out += [*(f"- **{note.split(':', 1)[0]}**:{note.split(':', 1)[1]}" for note in notes)]
            out += [""] if notes else []
            if ok["dispatches"].notna().any():
                out += ["Where the time goes (per call):", ""]
                out += [counts_table(ok).to_markdown(index=False, disable_numparse=True), ""]
                out += [*(f"{note}\n" for note in linear_notes(ok))]
            if ok["mem_peak"].notna().any():
                out += ["Memory (per call):", ""]
                out += [memory_table(ok).to_markdown(index=False, disable_numparse=True), ""]
                out += [*(f"- {note}" for note in memory_notes(ok))]
                out += [""] if memory_notes(ok) else []
        failed = problems(group)
        out += [f"- **{backend}** {status}: {error}" for backend, status, error in failed]
        if failed:
            out.append("")
    for title, _, table in scaling_tables(frame):
        out += [f"## Scaling: {title}", ""]
        out += [table.to_markdown(index=False, disable_numparse=True), ""]
    run_time = run_time_table(frame) if not frame.empty else None
    if run_time is not None and not run_time.empty:
        out += ["## Where the run's time went", ""]
        out += [run_time.to_markdown(index=False, disable_numparse=True), ""]
    if apart:
        out += ["## Not compared", ""]
        out += [f"- {item.what}: {item.reason}" for item in apart]
        out.append("")
    out += ["## Environment", ""]
    out += [f"- {line}" for line in environment_lines(runs)]
    out += ["", COLUMN_HELP]
    return "\n".join(out)

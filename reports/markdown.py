"""Markdown report (for terminals, CI summaries and PR comments) of a
`scanbench.reports.model.Report`."""

from __future__ import annotations

from scanbench.shown_text import for_terminal, one_line, table_cell

from .growth_section import GrowthSection
from .model import Report


def _markdown(frame) -> str:
    """The table of ``frame``, each cell's text kept in its cell (``|``, line breaks)."""
    cells = frame.map(lambda value: table_cell(value) if isinstance(value, str) else value)
    cells.columns = [table_cell(str(name)) for name in frame.columns]
    return cells.to_markdown(index=False, disable_numparse=True)


def _bold_head(note: str) -> str:
    """``- **backend**: the rest`` of a note that starts with the backend's name."""
    head, _, rest = note.partition(":")
    return f"- **{head}**:{rest}"


def _growth(section: GrowthSection) -> list[str]:
    """A sweep: its fitted costs, crossovers, trends, the user's size, what was skipped."""
    out = [f"## Growth: {section.title}", ""]
    if not section.fits.empty:
        out += ["Fitted time per call = fixed + per unit x units^k (95% intervals):", ""]
        out += [_markdown(section.fits), ""]
    out += [f"- {text}" for text in (*section.crossovers, *section.trends)]
    out += [f"- {section.own}"] if section.own else []
    out += [f"- skipped or failed: {text}" for text in section.skipped]
    out += [f"- {note}" for note in section.notes]
    return [*out, ""]


def render(report: Report) -> str:
    """Per scenario, size, dtype and device: the timing table, the counts table, the memory
    table, the failed and skipped cells; then scaling, where the run's time went, what was
    not compared and why, each run's environment and the column help."""
    out = ["# scanbench results", ""]
    if report.frame.empty:
        out += ["No records.", ""]
    if not report.glance.empty:
        out += ["## At a glance", "", _markdown(report.glance), ""]
    for table in report.tables:
        out += [f"## {table.title}", ""]
        if table.timing is not None:
            out += [_markdown(table.timing), ""]
            out += [_bold_head(note) for note in table.notes]
            out += [""] if table.notes else []
        if table.counts is not None:
            out += ["Where the time goes (per call):", "", _markdown(table.counts), ""]
            out += [f"{note}\n" for note in table.linear_notes]
        if table.diagnoses:
            out += ["What to change:", ""]
            out += [f"- **{backend}**: {text}" for backend, text in table.diagnoses]
            out.append("")
        if table.memory is not None:
            out += ["Memory (per call):", "", _markdown(table.memory), ""]
            out += [f"- {note}" for note in table.memory_notes]
            out += [""] if table.memory_notes else []
        out += [
            f"- **{backend}** {status}: {one_line(error)}"
            for backend, status, error in table.problems
        ]
        out += [""] if table.problems else []
    for section in report.growth:
        out += _growth(section)
    for scaling in report.scaling:
        out += [f"## Scaling: {scaling.title}", "", _markdown(scaling.table), ""]
    if report.run_time is not None:
        out += ["## Where the run's time went", "", _markdown(report.run_time), ""]
        out += [report.run_time_note, ""] if report.run_time_note else []
    if report.apart:
        out += ["## Not compared", ""]
        out += [f"- {one_line(item.what)}: {one_line(item.reason)}" for item in report.apart]
        out.append("")
    out += ["## Environment", ""]
    out += [f"- {one_line(line)}" for line in report.environment]
    out += ["", report.column_help]
    return for_terminal("\n".join(out))  # shown in terminals: no escape sequence obeyed

"""A report built once and written where asked: its markdown (returned) and HTML."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from scanbench.extras import check_html
from scanbench.results import Run
from scanbench.safe_files import write_text_atomic

from . import markdown as markdown_report
from .comparable import Apart
from .model import build


def write_reports(
    runs: Sequence[Run],
    apart: Sequence[Apart] = (),
    md: str | Path | None = None,
    html: str | Path | None = None,
    **options,
) -> str:
    """Build the report of ``runs`` once (``options``: `scanbench.reports.model.build`'s);
    write its markdown to ``md`` and its HTML to ``html`` when given (each atomically);
    return the markdown."""
    check_html(html)  # before the build: the HTML report's figures need matplotlib
    report = build(runs, apart, **options)
    markdown = markdown_report.render(report)
    if md:
        write_text_atomic(md, markdown)
    if html:
        # imported here for start-up cost only: the HTML report's plots import matplotlib
        # (about 0.7 s from cached bytecode), which a markdown-only run never needs
        from . import html as html_report

        write_text_atomic(html, html_report.render(report))
    return markdown

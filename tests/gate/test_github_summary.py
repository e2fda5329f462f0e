"""The job summary stays under GitHub's cap: 1 MiB per step, whatever the step appended
before (past it GitHub drops the step's whole summary and shows an error instead)."""

from __future__ import annotations

from scanbench.cli.main import main
from scanbench.gate.github import SUMMARY_LIMIT, append_summary, summary

LINE = "| cell | 1.00 us | 2.00 us | 2.0x |\n"


def test_a_long_summary_is_cut_at_a_line_with_a_note():
    markdown = LINE * (3 * SUMMARY_LIMIT // len(LINE))
    cut = summary(markdown)
    assert len(cut.encode()) <= SUMMARY_LIMIT
    kept, note = cut.split("\n\n*The summary is cut here: ")
    assert kept.endswith(LINE.rstrip("\n")) and "whole report is in the uploaded artifact" in note
    assert summary("short\n") == "short\n"


def test_each_append_fits_in_the_room_the_step_has_left(tmp_path):
    target = tmp_path / "step_summary.md"
    target.write_text("x" * (SUMMARY_LIMIT - 10_000) + "\n")  # an earlier command's part
    appended = append_summary(target, LINE * 10_000)
    assert 0 < appended <= 10_000
    assert target.stat().st_size <= SUMMARY_LIMIT
    assert "The summary is cut here" in target.read_text()
    assert append_summary(target, LINE * 10) == 0  # full: nothing more
    assert target.stat().st_size <= SUMMARY_LIMIT


def test_history_report_appends_its_summary_within_the_cap(tmp_path, monkeypatch):
    target = tmp_path / "step_summary.md"
    target.write_text("x" * (SUMMARY_LIMIT - 100) + "\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    history = tmp_path / "history"
    history.mkdir()
    html = tmp_path / "history.html"
    assert (
        main(["history", "report", "--history", str(history), "--html", str(html), "--github"]) == 0
    )
    assert target.stat().st_size <= SUMMARY_LIMIT
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "fresh.md"))
    assert (
        main(["history", "report", "--history", str(history), "--html", str(html), "--github"]) == 0
    )
    assert (tmp_path / "fresh.md").read_text().strip()

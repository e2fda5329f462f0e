"""Text that is not clean UTF-8 or plain: a scenario's exception message holding a lone
surrogate, markdown's ``|`` and line breaks, or a terminal's escape sequences is written
and shown escaped. A scenario's own exception is a failed cell (exit 1), never a crash
(70), in `run`, `report` and `gather`."""

from __future__ import annotations

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from scanbench.cli.main import main
from scanbench.results import load_run
from scanbench.shown_text import CONTROL, for_terminal, one_line, table_cell
from tests.execution.test_shards import write_shards
from tests.support.paths import DATA, SCENARIO_FILES

HOSTILE_FILE = SCENARIO_FILES / "hostile_text.py"
SURROGATE = "cannot open caf\udce9.npy"
HOSTILE_ERROR = f"RuntimeError: {SURROGATE} | a\n# heading\x1b[2J\rover\x9b"
ESCAPES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@given(st.text())
def test_text_for_the_terminal_encodes_and_holds_no_control_character(text):
    shown = for_terminal(text)
    shown.encode("utf-8")  # no lone surrogate left
    assert not CONTROL.search(shown)
    assert shown.count("\n") == text.count("\n")


@given(st.text())
def test_a_table_cell_and_a_list_item_stay_on_their_line(text):
    cell = table_cell(text)
    assert "\n" not in cell and "\r" not in cell and "\n" not in one_line(text)
    assert not re.search(r"(?<!\\)\|", cell)


def _assert_clean(text: str) -> None:
    assert "caf\\udce9.npy" in text  # escaped, not lost
    assert not ESCAPES.search(text.replace("\n", ""))
    assert "\n# heading" not in text  # the message did not start a heading


def _hostile_results(path):
    data = json.loads((DATA / "toy-failed.json").read_text())
    data["records"][1]["error"] = HOSTILE_ERROR
    data["environment"]["hostname"] = "vm\n# a heading | in a cell"
    path.write_text(json.dumps(data))  # escapes the surrogate, as a results file holds it
    return path


def test_report_writes_and_prints_hostile_text_escaped(tmp_path, capsys):
    results = _hostile_results(tmp_path / "run.json")
    html = tmp_path / "r.html"
    assert main(["report", str(results), "--html", str(html)]) == 0  # markdown: printed
    _assert_clean(capsys.readouterr().out)
    assert "caf\\udce9.npy" in html.read_text(encoding="utf-8")


def test_gather_of_shards_with_hostile_text_is_no_crash(tmp_path, capsys):
    paths = write_shards(tmp_path, 2)
    data = json.loads(paths[0].read_text())
    data["records"][0].update(status="failed", error=HOSTILE_ERROR)
    paths[0].write_text(json.dumps(data))
    out, md = tmp_path / "m.json", tmp_path / "m.md"
    assert main(["gather", *map(str, paths), "--out", str(out), "--md", str(md)]) == 1
    _assert_clean(md.read_text(encoding="utf-8"))
    _assert_clean(capsys.readouterr().out)


def test_a_scenario_failing_with_hostile_text_is_a_failed_cell(tmp_path, capsys):
    out, md = tmp_path / "run.json", tmp_path / "run.md"
    args = ["run", "--scenario-file", str(HOSTILE_FILE), "--size", "smoke", "--no-probes"]
    args += ["--min-time", "0.01", "--max-time", "0.05", "--out", str(out), "--md", str(md)]
    assert main(args) == 1
    records = {r.backend: r for r in load_run(out).records}
    assert {r.status for r in records.values()} == {"failed"}
    assert SURROGATE in records["surrogate"].error  # stored as it was raised
    text = md.read_text(encoding="utf-8")
    assert "caf\\udce9.npy" in text and not ESCAPES.search(text.replace("\n", ""))
    out, err = capsys.readouterr()
    assert not ESCAPES.search((out + err).replace("\n", ""))
    assert "\\x1b]0;retitled" in err  # the progress line shows the escape, not obeys it


def test_the_job_summary_takes_hostile_text(tmp_path):
    from scanbench.gate.github import append_summary

    summary = tmp_path / "summary.md"
    assert append_summary(summary, HOSTILE_ERROR) > 0
    assert "caf\\udce9.npy" in summary.read_text(encoding="utf-8")
    assert not ESCAPES.search(summary.read_text(encoding="utf-8").replace("\n", ""))


def test_an_error_is_one_line_whatever_its_message_holds(tmp_path, capsys):
    scenario = tmp_path / "broken.py"
    scenario.write_text('raise RuntimeError("boom\\n::error::injected\\x1b[2J")\n')
    assert main(["list", "--scenario-file", str(scenario)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.endswith("RuntimeError: boom\\n::error::injected\\x1b[2J")

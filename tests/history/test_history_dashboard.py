"""The dashboard of a synthetic history with known steps: `scanbench history add` then
`scanbench history report`, read as text (every planted change in the table, newest
first, linked to its commit; self-contained) and rendered by a real headless Chromium
(the screenshot is not blank; the page logs nothing to the console)."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess

import numpy as np
import pytest

from scanbench.cli.main import main
from scanbench.history import archive, series, summary
from scanbench.history.entry import CellPoint, Commit, Machine, Setup
from tests.history.test_history_changes import (
    MACHINES,
    PLANTED_COUNTS,
    PLANTED_TIMES,
    sha,
    synthetic_run,
    synthetic_runs,
    write_runs,
)
from tests.support.import_root import own_import_root

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory):
    where = tmp_path_factory.mktemp("dashboard")
    paths = write_runs(synthetic_runs(), where / "runs")
    history, html, md = where / "history", where / "history.html", where / "history.md"
    with own_import_root():
        assert main(["history", "add", *paths, "--history", str(history)]) == 0
        argv = ["history", "report", "--history", str(history), "--html", str(html)]
        assert main([*argv, "--md", str(md)]) == 0
    return where, html.read_text(), md.read_text()


def test_the_markdown_lists_every_planted_change_newest_first(dashboard):
    _, _, md = dashboard
    table = [line for line in md.splitlines() if line.startswith("| [`")]
    planted = len(PLANTED_COUNTS) * len(MACHINES)
    planted += sum(len(MACHINES) if only is None else 1 for _, only, _, _ in PLANTED_TIMES)
    assert len(table) == planted
    indices = [int(re.search(r"\) change (\d+) \|", line)[1]) for line in table]
    assert indices == sorted(indices, reverse=True)
    assert f"[`{sha(10)[:7]}`](https://github.com/example/project/commit/{sha(10)})" in md
    assert "dispatches 202 -> 303 per call (+101; solve_step 0 -> 101)" in md
    assert "time 2." in md and "x slower" in md and "x faster" in md


def test_the_page_is_self_contained_and_links_points_to_commits(dashboard):
    _, html, _ = dashboard
    assert html.startswith("<!DOCTYPE html>")
    for remote in ("<script", "<link", "@import", "url(http", 'src="http', "<img"):
        assert remote not in html
    cells = 4
    assert html.count("<svg ") == cells + 2  # one time figure per cell, two with counts
    for index in (0, 10, 35):  # every point and tick label links to its commit
        assert f'xlink:href="https://github.com/example/project/commit/{sha(index)}"' in html
    assert html.count('id="cell-') == cells


@pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (Debian: apt-get install chromium)"
)
def test_chromium_renders_the_dashboard_without_console_messages(dashboard, tmp_path):
    from PIL import Image

    where, _, _ = dashboard
    canary = tmp_path / "canary.html"  # the check sees console messages at all
    canary.write_text("<!DOCTYPE html><script>console.error('canary')</script>")
    assert "canary" in _console(canary, tmp_path / "a.png", tmp_path / "a")
    shot = tmp_path / "shot.png"
    assert _console(where / "history.html", shot, tmp_path / "b") == ""
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 2400)
    # the changes table and the first figures: many colours, not a blank page
    colours = image.crop((0, 0, 1280, 2400)).getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 100
    # the slower rows of the changes table are red, the faster ones green
    pixels = np.asarray(image)
    assert ((pixels[..., 0] > 150) & (pixels[..., 1] < 60) & (pixels[..., 2] < 60)).sum() > 200
    assert ((pixels[..., 1] > 90) & (pixels[..., 0] < 40) & (pixels[..., 2] < 40)).sum() > 50


def _console(page, shot, profile) -> str:
    """Chromium's console lines for ``page`` (screenshot written to ``shot``)."""
    flags = [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", f"--screenshot={shot}", "--window-size=1280,2400",
        "--enable-logging=stderr", "--v=0",
    ]  # fmt: skip
    done = subprocess.run(
        [CHROMIUM, *flags, page.as_uri()], check=True, timeout=120, capture_output=True, text=True
    )
    return "\n".join(line for line in done.stderr.splitlines() if ":CONSOLE" in line)


def test_a_short_history_says_not_enough_points_rather_than_guess(tmp_path, capsys):
    rng = np.random.default_rng(1)
    runs = [synthetic_run(i, "ci-box", rng) for i in range(4, 9)]  # h2d changes at 7
    paths = write_runs(runs, tmp_path / "runs")
    history = tmp_path / "h"
    assert main(["history", "add", *paths, "--history", str(history)]) == 0
    html = tmp_path / "d.html"
    assert main(["history", "report", "--history", str(history), "--html", str(html)]) == 0
    md = capsys.readouterr().out
    assert "Not enough points for change points (they need 8 commits):" in md
    assert "- mppi/vmapped/smoke/float32 on A: 5 timed commits" in md
    assert "time " not in md  # no time change guessed ...
    assert "h2d 0 -> 2 per call" in md  # ... while counts are facts at any length
    assert "not enough points for change points (they need 8)" in html.read_text()


def test_only_the_branches_asked_for(tmp_path, capsys):
    rng = np.random.default_rng(2)
    runs = [synthetic_run(i, "ci-box", rng) for i in range(3)]
    runs += [synthetic_run(i, "ci-box", rng, branch="feature") for i in range(3, 5)]
    history = tmp_path / "h"
    main(["history", "add", *write_runs(runs, tmp_path / "runs"), "--history", str(history)])
    capsys.readouterr()
    html = tmp_path / "d.html"
    main(["history", "report", "--history", str(history), "--html", str(html)])
    assert "2 series" in capsys.readouterr().out
    main(
        ["history", "report", "--history", str(history), "--html", str(html), "--branch", "feature"]
    )
    out = capsys.readouterr().out
    assert "2 commits" in out and "1 series" in out


def test_a_change_between_unmeasured_commits_says_where_to_bisect(tmp_path, capsys):
    rng = np.random.default_rng(3)
    runs = [synthetic_run(i, "ci-box", rng) for i in (0, 3, 6, 9, 12)]  # h2d changes at 7
    history = tmp_path / "h"
    main(["history", "add", *write_runs(runs, tmp_path / "runs"), "--history", str(history)])
    capsys.readouterr()
    main(["history", "report", "--history", str(history), "--html", str(tmp_path / "d.html")])
    command = f"scanbench bisect {sha(6)[:7]} {sha(9)[:7]} --cell mppi/vmapped/smoke"
    hint = f"`{command} --dtype float32` finds it"
    assert hint in capsys.readouterr().out
    assert hint.strip("`").split("`")[0] in (tmp_path / "d.html").read_text()


@pytest.mark.parametrize(
    ("source", "argument"),
    [
        ("", "smoothing"),
        ("scanbench.scenarios.tridiagonal:SCENARIO", "smoothing"),
        ("/work/project/bench/scenario.py:SCENARIO", "bench/scenario.py:SCENARIO"),
        ("/elsewhere/scenario.py:MINE", "/elsewhere/scenario.py:MINE"),
    ],
)
def test_the_bisect_hint_names_a_scenario_file_from_where_it_runs(source, argument):
    from pathlib import Path

    from scanbench.history.summary import scenario_argument

    assert scenario_argument("smoothing", source, Path("/work/project")) == argument


def test_a_branch_the_history_does_not_hold_is_one_line_naming_those_it_holds(tmp_path, capsys):
    rng = np.random.default_rng(2)
    runs = [synthetic_run(0, "ci-box", rng), synthetic_run(1, "ci-box", rng, branch="feature")]
    history = tmp_path / "h"
    main(["history", "add", *write_runs(runs, tmp_path / "runs"), "--history", str(history)])
    capsys.readouterr()
    argv = ["history", "report", "--history", str(history), "--html", str(tmp_path / "d.html")]
    assert main([*argv, "--branch", "main", "--branch", "nosuch"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (
        "scanbench: error: --branch 'nosuch': no run of the history is on this branch; its "
        "branches: feature, main"
    )
    assert not (tmp_path / "d.html").exists()


def _step_history(folder, factor: float, confidence: float) -> None:
    """12 commits of one cell whose time steps by ``factor`` at commit 6, with 0.1%
    noise and tight intervals of the given confidence."""
    rng = np.random.default_rng(9)
    for index in range(12):
        entry = archive.entry_of(synthetic_run(index, "ci-box", rng), f"run-{index}.json")
        median = 1e-3 * (factor if index >= 6 else 1.0) * (1 + 0.001 * rng.standard_normal())
        cell = CellPoint(
            "tridiagonal", "scanned", "smoke", "float64", "ok", median=median,
            ci_low=median * 0.998, ci_high=median * 1.002, confidence=confidence, samples=30,
        )  # fmt: skip
        entry = dataclasses.replace(entry, cells=(cell,))
        assert archive.write_json_new(folder / entry.filename, entry.to_json())


def test_min_change_sets_the_smallest_time_change_reported(tmp_path, capsys):
    """A clear 4% step is below the default 5% and reported with --min-change 1.01; the
    page says which minimum it used, and the confidence of the stored intervals."""
    history = tmp_path / "h"
    history.mkdir()
    _step_history(history, 1.04, 0.99)
    html = tmp_path / "d.html"
    argv = ["history", "report", "--history", str(history), "--html", str(html)]
    assert main(argv) == 0
    assert "No change" in capsys.readouterr().out
    page = html.read_text()
    assert "by at least 5% and" in page and "median, 99% interval" in page
    assert main([*argv, "--min-change", "1.01"]) == 0
    out = capsys.readouterr().out
    assert f"| [`{sha(6)[:7]}`]" in out and "| time 1.04x slower: 1 ms -> 1.04 ms |" in out
    assert "by at least 1% and" in html.read_text()
    assert main([*argv, "--min-change", "1"]) == 2
    assert "--min-change must be finite and > 1" in capsys.readouterr().err


def test_the_bisect_hint_names_the_dtype_and_says_what_it_cannot_measure():
    commits = [Commit(sha(0)), Commit(sha(5), parents=(sha(4),))]
    line = series.Line("A", Machine("box"), Setup("0.10.2", "0.10.2"), "main")
    cell = CellPoint("mppi", "vmapped", "smoke", "float32", "ok", params=(("horizon", 8),))
    row = summary.Row(commits[1], commits[0], 1, cell.label, line, source="", point=cell)
    hint = summary.where(row)
    assert f"`scanbench bisect {sha(0)[:7]} {sha(5)[:7]} --cell mppi/vmapped/smoke" in hint
    assert "--dtype float32` finds it" in hint
    assert "default parameters" in hint
    plain = dataclasses.replace(row, point=dataclasses.replace(cell, params=()))
    assert summary.where(plain).endswith("--dtype float32` finds it")

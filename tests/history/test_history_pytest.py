"""A pytest user's history: pytest-benchmark JSON written with the scanbench fixture,
added over commits (`scanbench.history.pytest_json`), with no scenario file."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from scanbench.cli.main import main
from tests.conftest import outer_pytest_free

TEST = """
import jax, jax.numpy as jnp

def step(c, x):
    return c * 0.5 + x

@jax.jit
def jitted(c, x):
    return step(c, x)

def accumulate(xs):
    STEPS

def test_accumulate(scanbench):
    scanbench(accumulate, jnp.ones((8, 4)), strategy="STRATEGY")
"""
SCANNED = "return jax.lax.scan(lambda c, x: (step(c, x), None), xs[0], xs)[0]"
LOOPED = "c = xs[0]\n    for x in xs:\n        c = jitted(c, x)\n    return c"


def _git(repo, *args):
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def _commit_and_measure(repo, out, steps: str, strategy: str, message: str):
    (repo / "test_acc.py").write_text(TEST.replace("STEPS", steps).replace("STRATEGY", strategy))
    _git(repo, "add", "test_acc.py")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", message)
    command = [
        sys.executable, "-m", "pytest", "test_acc.py", "-q", "-p", "no:cacheprovider",
        "--benchmark-max-time", "0.05", "--benchmark-json", str(out),
    ]  # fmt: skip
    done = subprocess.run(
        command, cwd=repo, capture_output=True, text=True, timeout=300, env=outer_pytest_free()
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return json.loads(out.read_text())


def test_fixture_results_over_commits_make_a_history_with_the_count_change(tmp_path, capsys):
    repo = tmp_path / "project"
    repo.mkdir()
    _git(repo, "init", "-q")
    first = _commit_and_measure(repo, tmp_path / "a.json", SCANNED, "scanned", "scan")
    assert first["commit_info"]["dirty"] is False
    _commit_and_measure(repo, tmp_path / "b.json", LOOPED, "scanned", "a loop slips in")
    history = tmp_path / "history"
    files = [str(tmp_path / "a.json"), str(tmp_path / "b.json")]
    assert main(["history", "add", *files, "--history", str(history)]) == 0
    entries = sorted(history.glob("*.json"))
    assert len(entries) == 2
    (cell,) = json.loads(entries[0].read_text())["cells"]
    assert cell["scenario"] == "test_acc.py::test_accumulate" and cell["backend"] == "accumulate"
    assert cell["median"] > 0 and cell["counts"]["dispatches"] >= 1
    html = tmp_path / "dashboard.html"
    assert main(["history", "report", "--history", str(history), "--html", str(html)]) == 0
    md = capsys.readouterr().out
    # the loop dispatches once per row more: the exact counts say so at two points
    before, after = map(int, re.search(r"dispatches (\d+) -> (\d+) per call", md).groups())
    assert after - before == 8, md
    assert "run the test with --benchmark-json at the commits between them" in md
    # a file measured with uncommitted changes is not history: refused with the reason
    dirty = dict(first, commit_info={**first["commit_info"], "dirty": True})
    (tmp_path / "dirty.json").write_text(json.dumps(dirty))
    assert main(["history", "add", str(tmp_path / "dirty.json"), "--history", str(history)]) == 1
    said = capsys.readouterr()
    assert "uncommitted changes (commit_info.dirty)" in said.out + said.err
    assert len(list(history.glob("*.json"))) == 2

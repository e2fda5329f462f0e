"""`scanbench bisect`: the binary search (pure, with a fake measurement), the decision of
a time step (with fake blocks), and the command on a user's repository with a regression
planted several commits deep and a commit that cannot be measured before it (slow: each
revision starts a JAX worker)."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scanbench.gate.interleave import Blocks
from scanbench.gate.rules import BaselineRule, Settings
from scanbench.history import bisection as bisect
from scanbench.history.bisection import Mark, search
from tests.support import user_repo

BROKEN = user_repo.TOUCHED.replace("def smooth(xs):", "def smooth(xs:")  # a syntax error


@pytest.mark.parametrize("count", [1, 2, 3, 7, 16, 33])
def test_the_search_finds_every_first_bad_commit_in_log2_steps(count):
    for first in range(count):
        asked = []

        def classify(index, good, bad, first=first, asked=asked):
            assert good < index < bad
            asked.append(index)
            return Mark.BAD if index >= first else Mark.GOOD

        assert search(count, classify) == (first - 1, first, ())
        assert len(asked) <= math.ceil(math.log2(count)) if count > 1 else not asked


def test_a_skipped_commit_is_stepped_around_and_named_when_it_may_be_the_one():
    marks = {0: Mark.GOOD, 1: Mark.GOOD, 2: Mark.SKIP, 3: Mark.GOOD, 4: Mark.BAD, 5: Mark.BAD}
    assert search(7, lambda i, g, b: marks[i]) == (3, 4, ())
    marks[3] = Mark.UNDECIDED
    assert search(7, lambda i, g, b: marks[i]) == (1, 4, ((2, Mark.SKIP), (3, Mark.UNDECIDED)))
    everything = tuple((i, Mark.UNDECIDED) for i in range(6))
    assert search(7, lambda i, g, b: Mark.UNDECIDED) == (-1, 6, everything)


def _blocks(ratios, count: int = 8) -> Blocks:
    base = [[1e-3] * 5 for _ in range(count)]
    cand = [[1e-3 * r] * 5 for r in ratios[:count]]
    return Blocks({"baseline": base, "candidate": cand}, {})


@pytest.mark.parametrize(
    ("ratios", "mark", "measurements"),
    [
        ([2.0, 2.1, 1.9, 2.05, 1.95, 2.0, 2.02, 1.98], Mark.BAD, 1),
        ([1.0, 1.01, 0.99, 1.02, 0.98, 1.0, 1.01, 0.99], Mark.GOOD, 1),
        ([1.3, 1.7, 1.4, 1.6, 1.5, 1.45, 1.55, 1.5], Mark.UNDECIDED, 3),  # straddles 1.5
    ],
)
def test_a_time_step_measures_again_while_undecided_and_never_guesses(
    monkeypatch, ratios, mark, measurements
):
    calls = []

    def measure(rule, sides, settings, seed, timeout_s, explain=False):
        calls.append(seed)
        return _blocks(ratios)

    monkeypatch.setattr(bisect, "measure_blocks", measure)
    rule = BaselineRule("s", "b", "smoke", 0.5, 10e-6)
    how = bisect.TimeSettings(1.5, Settings(), retries=2)
    found, evidence, _ = bisect.time_step(rule, {}, how, seed=0)
    assert found == mark and len(calls) == measurements == len(evidence.decisions)
    assert evidence.blocks == 8 * measurements  # re-measurements pooled
    assert calls == list(range(measurements))  # fresh seeds
    low, high = evidence.decisions[-1].low, evidence.uppers[-1]
    assert low <= np.median(ratios) <= high


# ----- the command, on a user's repository


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SCANBENCH_"))}
    env.pop("PYTHONPATH", None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def scanbench_bisect(repo: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "scanbench.cli", "bisect", *args]
    return subprocess.run(
        command, cwd=repo, env=_environment(), capture_output=True, text=True, timeout=900
    )


CELL = ("--cell", "bench/scenario.py:SCENARIO/smooth/smoke")


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """``main``: the scan, two commits that change nothing measurable, one whose package
    does not import, one that fixes it, then the Python loop (the regression, five commits
    deep) and two more commits."""
    repo = user_repo.make(tmp_path_factory.mktemp("user") / "repo")
    shas = {"good": user_repo.git(repo, "rev-parse", "HEAD")}
    for name, library in [
        ("reword", user_repo.TOUCHED),
        ("tidy", user_repo.TOUCHED + "\n# tidy\n"),
        ("broken", BROKEN),
        ("fixed", user_repo.TOUCHED + "\n# fixed\n"),
        ("regression", user_repo.SLOW),
        ("after", user_repo.SLOW + "\n# after\n"),
        ("bad", user_repo.SLOW + "\n# later\n"),
    ]:
        shas[name] = user_repo.commit(repo, library, f"{name}: change mylib")
    user_repo.git(repo, "remote", "add", "origin", "git@github.com:user/project.git")
    return repo, shas


def _first(stdout: str) -> str:
    return re.search(
        r"^first (?:commit where the counts change|slower commit): (\w+)", stdout, re.M
    )[1]


@pytest.mark.slow
def test_counts_bisect_finds_the_planted_regression_and_explains_it(planted):
    repo, shas = planted
    done = scanbench_bisect(repo, shas["good"], shas["bad"], *CELL)
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _first(done.stdout) == shas["regression"]
    assert f"https://github.com/user/project/commit/{shas['regression']}" in done.stdout
    assert re.search(
        rf"^step {shas['broken'][:7]} .*: skipped: could not be measured", done.stdout, re.M
    )
    assert re.search(r"head adds \d+ dispatches per call \(1 -> \d+\)", done.stdout)
    lines = done.stdout.splitlines()
    assert lines[1].startswith(f"GOOD {shas['good'][:7]}") and "dispatches 1" in lines[1]
    assert lines[2].startswith(f"BAD {shas['bad'][:7]}") and "differs from GOOD" in lines[2]


@pytest.mark.slow
def test_time_bisect_decides_each_step_against_good_interleaved(planted):
    repo, shas = planted
    done = scanbench_bisect(
        repo,
        shas["good"],
        shas["bad"],
        *CELL,
        "--time",
        "--factor",
        "1.5",
        "--gates",
        "bench/gates.toml",
    )
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _first(done.stdout) == shas["regression"]
    steps = [line for line in done.stdout.splitlines() if line.startswith("step ")]
    assert all(
        re.search(r"this/GOOD [\d.]+x, 99% bounds \[", s) for s in steps if "skipped" not in s
    )
    assert "head adds" in done.stdout


@pytest.mark.slow
def test_no_change_between_good_and_bad_says_so(planted):
    repo, shas = planted
    done = scanbench_bisect(repo, shas["good"], shas["tidy"], *CELL)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no change: every count per call is the same at GOOD and BAD" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("bad", "good", *CELL), "is not an ancestor of BAD"),
        (("good", "bad", "--cell", "smooth"), "expected SCENARIO/BACKEND/SIZE"),
        (("good", "bad", *CELL, "--factor", "1.5"), "--factor only works with --time"),
        (("good", "nosuch", *CELL), "BAD 'nosuch': not a commit"),
        (("good", "bad", "--cell", "bench/scenario.py:SCENARIO/nosuch/smoke"), "unknown backend"),
    ],
)
def test_bad_input_is_one_line(planted, args, says):
    repo, shas = planted
    named = [shas.get(arg, arg) for arg in args]
    done = scanbench_bisect(repo, *named)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert says in line


# ----- the search's bookkeeping, on a repository of plain files (no JAX: measuring faked)


@pytest.fixture
def plain_repo(tmp_path) -> tuple[Path, list[str]]:
    """Commits whose ``level.txt`` says what a measurement finds: ``ok``, ``slow``,
    ``broken`` (cannot be measured) or ``noisy`` (undecided however often measured)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    user_repo.git(repo, "init", "-q", "-b", "main")
    user_repo.git(repo, "config", "user.email", "user@example.com")
    user_repo.git(repo, "config", "user.name", "A user")
    shas = []
    for index, level in enumerate(["ok", "ok", "broken", "ok", "noisy", "slow", "slow"]):
        (repo / "level.txt").write_text(f"{level}\n{index}\n")
        user_repo.git(repo, "add", "-A")
        user_repo.git(repo, "commit", "-q", "-m", f"{index}: {level}")
        shas.append(user_repo.git(repo, "rev-parse", "HEAD"))
    return repo, shas


def _fake_facts(dispatches: float):
    from scanbench.gate.explain import Facts

    return Facts({"dispatches": dispatches}, {}, {"jax": "x"})


def _level(tree: Path) -> str:
    return (tree / "level.txt").read_text().split()[0]


def test_a_counts_bisect_steps_around_what_cannot_be_measured(monkeypatch, plain_repo):
    from scanbench.api import HarnessError
    from scanbench.history.bisection_text import conclusion

    def counts(rule, tree, home, timeout_s):
        level = _level(tree)
        if level == "broken":
            raise HarnessError("worker died:\nTraceback ...\nSyntaxError: invalid syntax")
        return _fake_facts(51.0 if level == "slow" else 1.0)

    monkeypatch.setattr(bisect, "counts_facts", counts)
    repo, shas = plain_repo
    rule = BaselineRule("s", "b", "smoke", 0.1, 10e-6)
    steps = []
    good, bad = (bisect.resolve(repo, sha, "x") for sha in (shas[0], shas[-1]))
    result = bisect.Bisect(rule, repo, good, bad, None, 60.0, steps.append).run()
    assert result.status is bisect.Status.FOUND and result.first.sha == shas[5]
    assert result.mode is bisect.Mode.COUNTS
    assert [s.role for s in steps[:2]] == [bisect.Role.GOOD, bisect.Role.BAD]
    assert [s.mark for s in steps if s.role == "step"][-1] == Mark.BAD
    assert result.differences[0].name == "dispatches"
    text = conclusion(result, "https://github.com/o/r.git")
    assert f"https://github.com/o/r/commit/{shas[5]}" in text
    assert "head adds 50 dispatches per call (1 -> 51)" in text
    skipped = [s for s in steps if s.mark == Mark.SKIP]
    for step in skipped:  # a worker's traceback, in one line
        assert step.error == "worker died: ... SyntaxError: invalid syntax"


def test_an_undecided_time_step_stops_the_search_with_the_commits_left(monkeypatch, plain_repo):
    from scanbench.history.bisection_text import conclusion

    def time_step(rule, sides, how, seed):
        level = _level(sides["candidate"].root)
        mark = {"ok": Mark.GOOD, "slow": Mark.BAD}.get(level, Mark.UNDECIDED)
        facts = {"baseline": _fake_facts(1.0), "candidate": _fake_facts(1.0)}
        return mark, None, facts

    monkeypatch.setattr(bisect, "time_step", time_step)
    repo, shas = plain_repo
    rule = BaselineRule("s", "b", "smoke", 0.5, 10e-6)
    good, bad = (bisect.resolve(repo, sha, "x") for sha in (shas[3], shas[-1]))
    how = bisect.TimeSettings(1.5, Settings())
    result = bisect.Bisect(rule, repo, good, bad, how, 60.0, lambda step: None).run()
    assert result.status is bisect.Status.UNDECIDED and result.mode is bisect.Mode.TIME
    assert [r.sha for r in result.candidates] == shas[4:6]  # the noisy one, or the next
    text = conclusion(result, None)
    assert text.startswith(
        f"not pinned down (a step stayed undecided): the first slower "
        f"commit is one of {shas[4][:7]}, {shas[5][:7]}"
    )


def test_a_bisect_takes_the_cell_s_own_baseline_rule_from_the_gate_file(tmp_path):
    """``--gates``: the cell's ``[[baseline]]`` rule gives the delta, floor, worker pairs
    and blocks; another cell gets the file's settings."""
    from scanbench.cli.bisect import _rule
    from scanbench.cli.main import build_parser

    gates = tmp_path / "gates.toml"
    gates.write_text(
        "[settings]\ndelta = 0.1\nfloor_s = 2e-5\n\n"
        '[[baseline]]\nscenario = "tridiagonal"\nbackend = "sequential-jax"\nsize = "smoke"\n'
        "delta = 0.3\nfloor_s = 5e-5\nworker_pairs = 3\nblocks = 8\n"
    )

    def rule_of(cell: str, *more: str) -> BaselineRule:
        argv = ["bisect", "a", "b", "--cell", cell, "--gates", str(gates), *more]
        return _rule(build_parser().parse_args(argv))[0]

    own = rule_of("tridiagonal/sequential-jax/smoke", "--time")
    assert (own.delta, own.floor_s, own.worker_pairs, own.blocks) == (0.3, 5e-5, 3, 8)
    assert rule_of("tridiagonal/sequential-jax/smoke", "--time", "--factor", "1.5").delta == 0.5
    other = rule_of("tridiagonal/scanned-time-major/smoke", "--time")
    assert (other.delta, other.floor_s, other.worker_pairs, other.blocks) == (0.1, 2e-5, None, None)


def test_bisect_outside_a_git_repository_says_so(tmp_path):
    from scanbench.api import InputError

    with pytest.raises(InputError, match=rf"^{re.escape(str(tmp_path))} is not a git repository"):
        bisect.resolve(tmp_path, "HEAD", "GOOD")

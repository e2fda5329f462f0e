"""`scanbench ab`: the same cells and code in two environments (flags, jax versions)."""

from __future__ import annotations

import os
import sys

import pytest

from scanbench.api import HarnessError, InputError
from scanbench.cli.main import main
from scanbench.gate.environments import (
    Environment,
    parse_assignments,
    probe,
    requirement_venv,
    venv_path,
)
from scanbench.gate.render import comparison_markdown
from scanbench.gate.two_environments import FASTER, SAME, SLOWER, CellComparison, _by_kind
from tests.support.paths import REPO_ROOT

CANDIDATE_ROOT = REPO_ROOT  # this checkout of scanbench

NO_FUSION = "XLA_FLAGS=--xla_disable_hlo_passes=fusion"


@pytest.fixture
def quick_gates(tmp_path):
    """Gate settings for tests: 6 blocks, one worker pair per side."""
    import tomli_w

    path = tmp_path / "gates.toml"
    settings = {"blocks": 8, "samples_per_block": 5, "worker_pairs": 1}
    path.write_text(tomli_w.dumps({"settings": settings}))
    return str(path)


OLDER_JAX = ("jax==0.10.0", "jaxlib==0.10.0")


@pytest.mark.solo  # its confirming re-run compares times: the other test worker's load
def test_an_xla_flag_with_a_known_effect_is_seen_in_time_and_counts(tmp_path, quick_gates):
    """Turning XLA's fusion off makes the TDMA time-major scan launch every elementwise op
    as its own kernel: 1,108 -> 2,408 per call at smoke (counted), and about 2x slower."""
    md = tmp_path / "compare.md"
    html = tmp_path / "compare.html"
    code = main(
        ["ab", "--scenario", "tridiagonal", "--backend", "scanned-time-major",
         "--size", "smoke", "--b-env", NO_FUSION, "--gates", quick_gates,
         "--md", str(md), "--html", str(html)]
    )  # fmt: skip
    assert code == 1  # B is significantly slower: the exit code says so
    text = md.read_text()
    assert "B slower on 1 of 1 cells" in text
    assert "kernels 1,108 -> 2,408" in text
    assert "confirmed by a re-run in fresh processes" in text
    assert "--xla_disable_hlo_passes=fusion" in text  # the side says what it ran with
    assert "<table" in html.read_text()


def test_identical_sides_are_no_significant_change(quick_gates):
    code = main(
        ["ab", "--scenario", "tridiagonal", "--backend", "numba-serial",
         "--size", "smoke", "--gates", quick_gates]
    )  # fmt: skip
    assert code == 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--b-env", "XLA_FLAGS"], "--b-env 'XLA_FLAGS': expected NAME=VALUE"),
        (["--a-env", "1X=2"], "--a-env '1X=2': expected NAME=VALUE"),
        (["--b-python", "/nonexistent/python"], "B: interpreter '/nonexistent/python' not"),
        (["--b-python", sys.executable, "--b-requirements", "jax"], "give one of them"),
    ],
)
def test_bad_sides_are_refused_in_one_line(argv, message, capsys):
    code = main(["ab", "--scenario", "tridiagonal", "--backend", "numba-serial", *argv])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_a_side_that_cannot_import_jax_or_is_too_old_fails_clearly(tmp_path):
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'raise ImportError(\"no jax here\")'\n")
    fake.chmod(0o755)
    with pytest.raises(HarnessError, match=r"cannot import jax and the project: .*no jax here"):
        probe("B", str(fake), {}, CANDIDATE_ROOT)
    old = tmp_path / "old"
    old.write_text(
        '#!/bin/sh\necho \'{"jax": "0.4.31", "jaxlib": "0.4.31", "python": "3.11", '
        f'"scanbench": "{CANDIDATE_ROOT / "harness" / "__init__.py"}"}}\'\n'
    )
    old.chmod(0o755)
    with pytest.raises(HarnessError, match=r"jax 0.4.31 is older than the project supports"):
        probe("A", str(old), {}, CANDIDATE_ROOT)
    with pytest.raises(InputError):
        parse_assignments(["=1"], "--a-env")


def test_counts_differences_are_read_by_kind_and_rendered():
    assert _by_kind({"m/copy.97": 100, "m/copy.100": 50, "m/fusion": 2}) == {
        "m/copy": 150,
        "m/fusion": 2,
    }
    sides = {
        "baseline": Environment("A", "/a/python", {}, {"jax": "0.10.2"}),
        "candidate": Environment("B", "/b/python", {"XLA_FLAGS": "--x"}, {"jax": "0.10.0"}),
    }
    rows = [
        CellComparison("s/b/smoke", 1.5, 1.4, 1.6, SLOWER, "confirmed", {"kernels": (1, 2)}, {}),
        CellComparison("s/c/smoke", 0.5, 0.4, 0.6, FASTER, "", {}, {"kernels: m/copy": (3, 1)}),
        CellComparison("s/d/smoke", 1.0, 0.9, 1.1, SAME, "", {}, {}, ("B: worker died",)),
    ]
    text = comparison_markdown(rows, sides, 0.99, 0.1)
    assert "B slower on 1 of 3 cells" in text
    assert "B = /b/python (jax 0.10.0), XLA_FLAGS=--x" in text
    assert "kernels 1 -> 2" in text and "kernels: m/copy: 3 -> 1" in text
    assert "B: worker died" in text


def test_requirement_venvs_are_cached_by_interpreter_and_requirements(tmp_path, monkeypatch):
    monkeypatch.setenv("SCANBENCH_CACHE", str(tmp_path))
    first = venv_path(["jax==0.10.0", "jaxlib==0.10.0"], CANDIDATE_ROOT)
    assert first == venv_path(
        ["jaxlib==0.10.0", "jax==0.10.0"], CANDIDATE_ROOT
    )  # order does not matter
    assert first != venv_path(["jax==0.10.1"], CANDIDATE_ROOT)
    assert first.parent == tmp_path / "venvs"
    with pytest.raises(HarnessError, match="could not build the venv"):
        requirement_venv(["this-package-does-not-exist-scanbench==0"], CANDIDATE_ROOT)
    assert not any((tmp_path / "venvs").iterdir())  # nothing half-built is left behind


def test_two_jax_versions_on_a_tdma_and_an_mppi_cell(tmp_path, quick_gates):
    """jax 0.10.0 (B) against the installed one (A). Building the 0.10.0 venv takes ~3 min
    and PyPI: it runs when the venv is cached or SCANBENCH_BUILD_VENVS=1."""
    cached = (venv_path(list(OLDER_JAX), CANDIDATE_ROOT) / "bin" / "python").exists()
    if not cached and not os.environ.get("SCANBENCH_BUILD_VENVS"):
        pytest.skip("the jax 0.10.0 venv is not cached; SCANBENCH_BUILD_VENVS=1 builds it (~3 min)")
    md = tmp_path / "versions.md"
    argv = ["ab", "--scenario", "tridiagonal", "--backend", "scanned-time-major",
            "--size", "smoke", "--gates", quick_gates, "--md", str(md)]  # fmt: skip
    for requirement in OLDER_JAX:
        argv += ["--b-requirements", requirement]
    assert main(argv) in (0, 1)
    text = md.read_text()
    assert "jax 0.10.0" in text and "tridiagonal/scanned-time-major/smoke" in text
    argv = ["ab", "--scenario", "mppi_tuning", "--backend", "scanned", "--size", "smoke",
            "--gates", quick_gates, "--md", str(md)]  # fmt: skip
    for requirement in OLDER_JAX:
        argv += ["--b-requirements", requirement]
    assert main(argv) in (0, 1)
    assert "mppi_tuning/scanned/smoke" in md.read_text()


def test_the_old_command_name_says_the_new_one(capsys):
    assert main(["compare", "--scenario", "tridiagonal"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert (
        line
        == "scanbench: error: 'scanbench compare' is now 'scanbench ab' (see 'scanbench ab --help')"
    )

"""The light core install: what works without the optional packages, and the one line
that names the extra where a feature needs one (`scanbench.extras`).

The subprocess tests run scanbench with every optional package made unimportable (a
``sitecustomize`` on ``PYTHONPATH`` that every process it starts inherits, workers
included), as a user of ``pip install scanbench`` has it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from scanbench import extras

ROOT = Path(__file__).resolve().parents[2]
BLOCKER = """
import sys

BLOCKED = {blocked!r}


class _Blocked:
    \"\"\"A finder that refuses the optional packages, as if not installed.\"\"\"

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked)", name=name)
        return None


sys.meta_path.insert(0, _Blocked())
"""


@pytest.fixture
def without_extras(tmp_path: Path) -> dict[str, str]:
    """The environment of a process (and its children) without any optional package."""
    prelude = tmp_path / "prelude"
    prelude.mkdir()
    (prelude / "sitecustomize.py").write_text(BLOCKER.format(blocked=sorted(extras.EXTRAS)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(prelude), env.get("PYTHONPATH")]))
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def _python(code: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _scanbench(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return _python(
        f"import sys; from scanbench.cli.main import main; sys.argv = ['scanbench', *{args!r}]; "
        "sys.exit(main())",
        env,
        cwd,
    )


def test_the_table_names_every_optional_package_of_pyproject():
    """`EXTRAS` and pyproject's runtime extras (those ``all`` names) list the same
    packages under the same extras, and the core lists none of them."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = project["optional-dependencies"]
    (everything,) = optional["all"]
    runtime = re.fullmatch(r"scanbench\[(.+)\]", everything).group(1).split(",")

    def name(requirement: str) -> str:
        return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower()

    listed = {(name(req), extra) for extra in runtime for req in optional[extra]}
    table = {(distribution, extra) for extra, distribution in extras.EXTRAS.values()}
    assert listed == table
    assert not {name(req) for req in project["dependencies"]} & {d for d, _ in table}
    assert set(optional) - {"all", "dev", "docs", "gpu"} == set(runtime)  # `all` is all
    assert "scanbench[all]" in optional["dev"]  # the tests need them all


def test_the_line_names_the_extra():
    line = extras.missing_line("matplotlib.figure", "HTML reports")
    assert line == "HTML reports need matplotlib: pip install 'scanbench[plots]'"
    with pytest.raises(KeyError, match="not an optional package"):
        extras.missing_line("jax", "anything")


def test_a_backend_without_its_extra_is_listed_as_skipped(monkeypatch):
    from scanbench.reports.catalogue import render
    from scanbench.scenarios import tridiagonal

    monkeypatch.setattr(extras, "available", lambda module: module != "numba")
    backend = extras.needing(
        tridiagonal.SCENARIO.backends["numba-serial"], "the Numba backends", "numba"
    )
    assert not backend.runs_at("smoke") and not backend.runs_at("default")
    backends = {**tridiagonal.SCENARIO.backends, backend.name: backend}
    scenario = dataclasses.replace(tridiagonal.SCENARIO, backends=backends)
    line = next(line for line in render([scenario]).splitlines() if "numba-serial" in line)
    assert line.endswith("[skipped: the Numba backends need numba: pip install 'scanbench[numba]']")


def test_without_the_extras_compare_and_a_markdown_report_work(without_extras, tmp_path):
    done = _python(
        """
        import sys
        import jax.numpy as jnp
        import scanbench

        x = jnp.arange(64.0)
        table = scanbench.compare(
            {"sequential": lambda v: v * 2.0, "vmapped": lambda v: v + v}, x, probes=False
        )
        text = scanbench.report(table, md="report.md")
        assert "sequential" in text and "vmapped" in text, text
        try:
            scanbench.report(table, html="report.html")
        except scanbench.HarnessError as error:
            print("html:", error)
        loaded = sorted(m for m in ("numba", "matplotlib", "evosax", "ribs") if m in sys.modules)
        print("loaded:", loaded)
        """,
        without_extras,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "loaded: []" in done.stdout
    assert "html: HTML reports (--html) need matplotlib: pip install 'scanbench[plots]'" in (
        done.stdout
    )
    assert (tmp_path / "report.md").exists() and not (tmp_path / "report.html").exists()


def test_without_numba_its_backends_are_stored_as_skipped(without_extras, tmp_path):
    done = _scanbench(
        [
            *("run", "--scenario", "tridiagonal", "--size", "smoke"),
            *("--backend", "numba-serial", "--no-probes", "--out", "run.json", "--quiet"),
        ],
        without_extras,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (record,) = json.loads((tmp_path / "run.json").read_text())["records"]
    assert record["backend"] == "numba-serial"
    assert record["status"] == "skipped", record
    text = json.dumps(record)
    assert "pip install 'scanbench[numba]'" in text


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--html", "report.html"],
            "HTML reports (--html) need matplotlib: pip install 'scanbench[plots]'",
        ),
        (
            ["--executor", "slurm"],
            "jobs submitted with --executor need submitit: pip install 'scanbench[slurm]'",
        ),
    ],
    ids=["html", "slurm"],
)
def test_without_its_extra_a_feature_is_one_line_and_exit_2(without_extras, tmp_path, args, line):
    done = _scanbench(
        [
            *("run", "--scenario", "tridiagonal", "--size", "smoke"),
            *("--backend", "vmapped", "--out", "run.json", *args),
        ],
        without_extras,
        tmp_path,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.strip() == f"scanbench: error: {line}"
    assert not (tmp_path / "run.json").exists()


def test_without_its_extras_the_history_report_is_one_line(without_extras, tmp_path):
    (tmp_path / "history").mkdir()
    done = _scanbench(
        ["history", "report", "--history", "history", "--html", "history.html"],
        without_extras,
        tmp_path,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.strip().startswith("scanbench: error: the history's dashboard need")
    assert "pip install 'scanbench[plots]'" in done.stderr


def test_without_pytest_benchmark_the_plugin_leaves_pytest_working(without_extras, tmp_path):
    (tmp_path / "test_user.py").write_text(
        "def test_plain():\n    assert True\n\n\n"
        "def test_fixture(scanbench):\n    scanbench(lambda: 1.0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "scanbench.pytest_plugin", "test_user.py"],
        env=without_extras,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "1 passed, 1 error" in done.stdout, done.stdout[-3000:]  # at the fixture's setup
    assert (
        "the scanbench pytest fixture need pytest-benchmark: "
        "pip install 'scanbench[pytest]'" in done.stdout
    )

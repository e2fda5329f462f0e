"""scanbench as a user meets it: the built wheel, installed into a fresh virtualenv, used
from a project of the user's own (slow: a wheel, a venv and a few workers, ~1 min).

The project has its own ``harness/``, ``reports/`` and ``scenarios/`` packages (names
scanbench used to install), a ``conftest.py``, and an uninstalled package ``mylib/`` at
its root that its scenario file (``bench/scenario.py``) imports; nothing sets
``PYTHONPATH``. Every way in must work from the project's root, and the user's packages
must be the ones the user's code imports.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support import user_repo
from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
pytestmark = pytest.mark.slow

MYLIB = '''"""The user's package: not installed, imported from the repository's root."""
import jax

WHERE = "tree"


@jax.jit
def double(x):
    return 2 * x


def loop(x):
    return x + x


def stale_marker():
    return WHERE
'''

SCENARIO = '''"""The user's scenario file: `import scanbench` and the user's own code only."""
import numpy as np

import mylib
import reports  # the user's own package of that name, not scanbench's
import scanbench

assert reports.OWNER == "user", reports.__file__

SIZE = scanbench.Size("smoke", {"n": 4096})


def check(output, expected, dtype):
    error = float(np.max(np.abs(np.asarray(output) - expected)))
    if error > 1e-6:
        raise scanbench.MismatchError("differs from 2 x", error, 1e-6)
    return error


SCENARIO = scanbench.Scenario(
    name="mine",
    description="the user's own function",
    sizes={"smoke": SIZE, "default": scanbench.Size("default", {"n": 65536})},
    make_inputs=lambda size, seed, dtype: np.arange(size["n"], dtype=dtype),
    reference=lambda x: 2 * x,
    check=check,
    work=lambda size, dtype: {"items": size["n"]},
    backends={"jit": scanbench.jax_backend("jit", scanbench.Strategy.VMAPPED, mylib.double)},
    throughput_unit="items",
    dtypes=("float32",),
)
'''

USER_TEST = """import harness
import numpy as np
import reports

import mylib


def test_my_function_is_one_dispatch(scanbench):
    assert harness.OWNER == reports.OWNER == "user"
    measured = scanbench(mylib.double, np.arange(1000.0, dtype=np.float32), strategy="vmapped")
    assert measured.counts["dispatches"] == 1
"""

NOTEBOOK = """
import numpy as np
import reports
import scanbench
import mylib

assert reports.OWNER == "user"
x = np.arange(1000.0, dtype=np.float32)
table = scanbench.compare({"loop": mylib.loop, "vmap": mylib.double}, x, isolate=True)
assert list(table["status"]) == ["ok", "ok"], table[["status", "error"]].to_dict()
print(scanbench.report(table).splitlines()[0])
"""


def _tool_env() -> dict[str, str]:
    """This environment without PYTHONPATH and this run's pytest variables."""
    return {
        key: value
        for key, value in os.environ.items()
        if key != "PYTHONPATH" and not key.startswith(("PYTEST_", "SCANBENCH_"))
    }


def _run(command: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    done = subprocess.run(
        command, cwd=cwd, env=_tool_env(), capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{command}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def _venv_with(wheel: Path, where: Path) -> Path:
    """A fresh virtualenv holding the wheel with its ``pytest`` extra (the fixture's
    pytest-benchmark, and pytest with it) and their dependencies (uv when it is on the
    PATH, as the noxfile uses it: its cache makes this seconds; pip otherwise)."""
    venv = where / "venv"
    wanted = f"scanbench[pytest] @ {wheel.resolve().as_uri()}"
    uv = shutil.which("uv")
    if uv:
        _run([uv, "venv", "-q", "--python", sys.executable, str(venv)], where)
        _run(
            [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), wanted],
            where,
        )
    else:
        _run([sys.executable, "-m", "venv", str(venv)], where)
        _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", wanted], where)
    return venv


def _project(root: Path) -> None:
    for package in ("harness", "reports", "scenarios"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text('OWNER = "user"\n')
    (root / "conftest.py").write_text("import harness\n\nassert harness.OWNER == 'user'\n")
    (root / "mylib").mkdir()
    (root / "mylib" / "__init__.py").write_text(MYLIB)
    (root / "bench").mkdir()
    (root / "bench" / "scenario.py").write_text(SCENARIO)
    (root / "tests").mkdir()
    (root / "tests" / "test_mine.py").write_text(USER_TEST)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the venv's bin folder, the user's project)."""
    where = tmp_path_factory.mktemp("wheel")
    uv = shutil.which("uv")
    if uv:
        _run([uv, "build", "-q", "--wheel", "--out-dir", str(where), str(ROOT)], ROOT)
    else:
        _run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(where), str(ROOT)],
            ROOT,
        )
    (wheel,) = where.glob("scanbench-*.whl")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"scanbench"}
    venv = _venv_with(wheel, where)
    project = where / "project"
    _project(project)
    return venv / "bin", project


def test_the_command_line_runs_a_user_scenario_from_the_project_root(installed):
    bin_dir, project = installed
    scanbench = str(bin_dir / "scanbench")
    run = [scanbench, "run", "--scenario-file", "bench/scenario.py", "--size", "smoke"]
    _run([*run, "--out", "results/run.json", "--quiet", "--max-time", "0.5"], project)
    stored = json.loads((project / "results" / "run.json").read_text())
    (record,) = stored["records"]
    assert record["status"] == "ok", record["error"]
    assert record["counts"]["trace"]["dispatches"] == 1
    assert stored["invocation"]["scenarios"]["mine"]["imports"]["mylib"] == "./mylib/__init__.py"
    report = _run([scanbench, "report", "results/run.json"], project).stdout
    assert "scenario mine imported" in report and "mylib -> ./mylib/__init__.py" in report
    profile = [scanbench, "profile", "--scenario-file", "bench/scenario.py", "--backend", "jit"]
    assert "dispatches" in _run([*profile, "--out", "results/trace"], project).stdout


def test_the_notebook_api_and_the_pytest_fixture_use_the_users_packages(installed):
    bin_dir, project = installed
    out = _run([str(bin_dir / "python"), "-c", NOTEBOOK], project).stdout
    assert out.strip()
    tests = _run([str(bin_dir / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"], project)
    assert "1 passed" in tests.stdout


def test_the_trees_copy_of_an_installed_user_package_is_measured(installed, tmp_path):
    """The user's package is also installed (an older copy in site-packages): the
    tree's copy, first on the path, is the one measured, and the report says so."""
    bin_dir, project = installed
    site = Path(
        _run([str(bin_dir / "python"), "-c", "import site; print(site.getsitepackages()[0])"],
             tmp_path).stdout.strip()
    )  # fmt: skip
    stale = site / "mylib"
    stale.mkdir()
    try:
        (stale / "__init__.py").write_text(
            MYLIB.replace("2 * x", "3 * x").replace('"tree"', '"site"')
        )
        out = _run([str(bin_dir / "python"), "-c", "import mylib; print(mylib.WHERE)"], tmp_path)
        assert out.stdout.strip() == "site"  # elsewhere, the installed copy is the one
        command = [str(bin_dir / "scanbench"), "run", "--scenario-file", "bench/scenario.py",
                   "--size", "smoke", "--no-probes", "--out", "results/stale.json",
                   "--quiet"]  # fmt: skip
        _run(command, project)  # the check would fail with the installed 3 * x
        stored = json.loads((project / "results" / "stale.json").read_text())
        assert stored["records"][0]["status"] == "ok"
        assert (
            stored["invocation"]["scenarios"]["mine"]["imports"]["mylib"] == "./mylib/__init__.py"
        )
    finally:
        shutil.rmtree(stale)


def test_the_gate_compares_revisions_of_the_users_repository(installed, tmp_path):
    """Installed from the wheel (no checkout of scanbench anywhere): `--against` takes a
    revision of the user's repository, each side importing its own tree's package."""
    bin_dir, _ = installed
    repo = user_repo.make(tmp_path / "repo")
    user_repo.commit(repo, user_repo.SLOW, "smooth in a Python loop")
    command = [str(bin_dir / "scanbench"), "gate", "--gates", "bench/gates.toml", "--against"]
    done = subprocess.run(
        [*command, "HEAD~1"], cwd=repo, env=_tool_env(), capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "smoothing/smooth/smoke" in done.stdout and "head adds" in done.stdout

"""The current directory is not on the command line's import path: a module planted there
does not run (``scanbench report`` in a folder of downloaded artefacts), whether the
command is run as the ``scanbench`` script or as ``python -m scanbench.cli``; a scenario
file of the user's still imports the user's own package from there."""

from __future__ import annotations

import importlib.machinery
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import DATA

PLANTED = """import pathlib
pathlib.Path(__file__).with_name("RAN").write_text("planted code ran")
raise SystemExit("planted module ran")
"""
COMMANDS = {
    "script": [str(Path(sys.executable).with_name("scanbench"))],
    "python -m": [sys.executable, "-m", "scanbench.cli"],
}


# what the command line imports; `python -m` puts the directory first before any code of
# scanbench runs, so what `import scanbench` imports (json, argparse, ...) is loaded from
# there before scanbench can drop it: only the script (or `python -P -m`) is safe of those
PLANTED_NAMES = {
    "script": ("tabulate", "numpy", "json", "argparse"),
    "python -m": ("tabulate", "numpy"),
}


def scanbench(how: str, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SCANBENCH_IMPORT_ROOT")}
    command = [*COMMANDS[how], *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("how", COMMANDS)
def test_a_module_planted_in_the_current_directory_does_not_run(tmp_path, how):
    for name in PLANTED_NAMES[how]:
        (tmp_path / f"{name}.py").write_text(PLANTED)
    out = scanbench(how, tmp_path, "report", str(DATA / "toy-failed.json"))
    assert out.returncode == 0, out.stderr
    assert not (tmp_path / "RAN").exists()


def test_a_scenario_file_still_imports_the_users_package_from_there(tmp_path):
    (tmp_path / "mylib_of_mine").mkdir()
    (tmp_path / "mylib_of_mine" / "__init__.py").write_text("NAME = 'toy'\n")
    toy = (Path(__file__).parents[1] / "support" / "scenario_files" / "toy.py").read_text()
    mine = toy.replace("import os\n", "import os\n\nimport mylib_of_mine\n", 1)
    (tmp_path / "mine.py").write_text(mine)
    out = scanbench("script", tmp_path, "list", "--scenario-file", "mine.py")
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("how", COMMANDS)
def test_a_clone_named_scanbench_in_the_current_directory_is_named_in_one_line(tmp_path, how):
    """Issue #70: from the folder that holds a clone named ``scanbench``, ``import
    scanbench`` finds the clone (no ``__init__.py``: an empty namespace package) before an
    editable install, and every name of it is missing. The command says so in one line
    (exit 2) instead of crashing; a wheel's package is found first and the command runs."""
    clone = tmp_path / "scanbench"
    (clone / "harness").mkdir(parents=True)
    (clone / "pyproject.toml").write_text("[project]\nname = 'scanbench'\n")
    out = scanbench(how, tmp_path, "list")
    installed = importlib.machinery.PathFinder.find_spec("scanbench", sys.path)
    if installed is not None and installed.origin:  # a wheel: a regular package wins
        assert out.returncode == 0, out.stderr
        return
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [
        f"scanbench: error: the folder {clone.resolve()} (a clone of scanbench?) hides the "
        "installed package: Python imports it from this directory as an empty package; run "
        "scanbench from another directory, or rename that folder"
    ]

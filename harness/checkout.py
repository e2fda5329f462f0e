"""Which code this is: the commit of a checkout and of the one scanbench is imported
from, and scanbench's version. Small and free of the measuring modules, so that a report
can say when a run was recorded by other code than the one rendering it."""

from __future__ import annotations

import os
import subprocess
from importlib import metadata
from pathlib import Path


def run_git(cwd: str | os.PathLike[str] | None, *args: str) -> subprocess.CompletedProcess:
    """``git *args`` in ``cwd`` (fixed arguments: no user input reaches them)."""
    command = ["git", *args]  # git from PATH, as the user's shell finds it
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=10)  # noqa: S603


def git_commit(cwd: str | os.PathLike[str] | None = None) -> str | None:
    try:
        result = run_git(cwd, "rev-parse", "HEAD")
    except (OSError, subprocess.SubprocessError):
        return None
    if result.returncode != 0:
        return None
    commit = result.stdout.strip()
    dirty = run_git(cwd, "status", "--porcelain", "--untracked-files=no")
    return commit + ("-dirty" if dirty.stdout.strip() else "")


def own_checkout() -> Path | None:
    """The checkout scanbench is imported from (an editable install of a clone), or None
    (installed from a wheel into site-packages)."""
    root = Path(__file__).resolve().parent.parent
    try:
        project = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    return root if 'name = "scanbench"' in project else None


def own_commit() -> str | None:
    """The commit of the checkout scanbench is imported from, if it is one."""
    root = own_checkout()
    return git_commit(root) if root is not None and (root / ".git").exists() else None


def version() -> str | None:
    """scanbench's installed version (its distribution's metadata), None when unknown."""
    try:
        return metadata.version("scanbench")
    except metadata.PackageNotFoundError:
        return None

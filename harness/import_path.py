"""Where a user's code is imported from: the directory scanbench was run in, first.

``python -m`` and ``python -c`` put the current directory first on the import path; a
console script such as ``scanbench`` puts its own ``bin/`` folder there instead. So that a
scenario file can ``import mylib`` from the repository the user works in (``mylib/`` at
its root, not installed), every command that loads a user's scenario
(`scanbench.sources.load`) and ``compare(..., isolate=True)`` import user code as
``python -m`` would from the directory they were run in (the *import root*): it comes
first on ``sys.path`` of this process and on ``PYTHONPATH`` of every process it starts,
ahead of the entries of an existing ``PYTHONPATH`` (kept, never replaced) and of
site-packages, so a package of the same name that is also installed is shadowed by the
tree's own copy. ``gate --against`` gives each side its own tree's root in that place.
Until a user's scenario is loaded the directory is not on the path at all
(`scanbench.cli.main`): a command that runs no user code runs nothing planted there.

Standard library only.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT_ENV = "SCANBENCH_IMPORT_ROOT"  # the entry put first, told apart from the user's own


def import_root() -> Path:
    """The import root of this process: the one `use_import_root` set (here or in the
    process that started this one), else the current directory."""
    return Path(os.environ.get(ROOT_ENV) or os.getcwd())


def with_import_root(environ: Mapping[str, str], root: str | os.PathLike[str]) -> dict[str, str]:
    """``environ`` for a process that imports user code from ``root`` first: ``root``
    ahead of the ``PYTHONPATH`` entries (an import root set earlier is replaced, the
    user's own entries are kept in order)."""
    env = dict(environ)
    entries = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]
    previous = env.get(ROOT_ENV)
    if previous and entries and entries[0] == previous:
        entries = entries[1:]
    root = str(Path(root).resolve())
    env["PYTHONPATH"] = os.pathsep.join([root, *entries])
    env[ROOT_ENV] = root
    return env


def use_import_root(root: str | os.PathLike[str] | None = None) -> Path:
    """Import user code from ``root`` (default: the current directory) first, in this
    process and in every process it starts from now on (through ``os.environ``)."""
    resolved = Path(root or os.getcwd()).resolve()
    os.environ.update(with_import_root(os.environ, resolved))
    if sys.path[:1] != [str(resolved)]:
        sys.path.insert(0, str(resolved))
    return resolved


def shown(path: str | os.PathLike[str], root: Path | None = None) -> str:
    """``path`` as a reader of a report wants it: ``./mylib/__init__.py`` inside the
    import root, else absolute."""
    path, root = Path(path).resolve(), (root or import_root()).resolve()
    try:
        return f"./{path.relative_to(root)}"
    except ValueError:
        return str(path)


def hiding_folder(root: str | os.PathLike[str] | None = None) -> Path | None:
    """A folder ``scanbench`` without ``__init__.py`` (a clone of scanbench, say) that
    hides the installed package: ``import scanbench`` run from ``root`` (default: the
    import root) finds it first, as an empty namespace package, so the names of
    ``scanbench`` are missing there and in every worker started from there. None when the
    installed package is the one found (a wheel's regular package wins over a namespace
    folder; an editable install's does not)."""
    loaded = sys.modules.get("scanbench")
    if loaded is not None and getattr(loaded, "__file__", None) is None:  # this process
        return Path(next(iter(loaded.__path__)))
    found = importlib.machinery.PathFinder.find_spec(
        "scanbench", [str(root or import_root()), *sys.path]
    )
    if found is None or found.origin not in (None, "namespace"):
        return None
    locations = list(found.submodule_search_locations or [])
    return Path(locations[0]) if locations else None

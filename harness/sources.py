"""Scenario sources: the one way the harness finds a workload.

A *source* is a string naming where a `Scenario` object lives:

- ``package.module:ATTR`` - an attribute of an importable module, e.g.
  ``scanbench.scenarios.tridiagonal:SCENARIO``;
- ``path/to/file.py:ATTR`` - an attribute of a Python file (a user's own workload); the
  path is made absolute when the source is resolved, so a worker started elsewhere loads
  the same file;
- ``path/to/file.pkl:ATTR`` - an entry of a pickled mapping ``{ATTR: Scenario}``
  (cloudpickle; `write_pickled`): how ``scanbench.compare(..., isolate=True)`` hands the
  in-memory scenario of a user's functions to the workers, which load it as they load any
  other source. Unpickling runs code, so a pickled source is accepted only from the
  run's own private directory (`pickle_directory`: made by the run, mode 0700, named in
  ``$SCANBENCH_PICKLED_SOURCES`` for its workers), never from the command line, a gate
  file or a stored run (``--resume``): those are refused in one line (exit 2).

The bundled scenarios are listed in a catalogue that is itself reached through a source
(``scanbench.scenarios:CATALOGUE``: name -> source), so the harness never imports ``scenarios``
directly. The parent process resolves what the user named (a catalogue name or a source)
to a source string; a cell carries that string, and its worker loads exactly it
(pyperf's worker model).

Example:
    >>> resolve("tridiagonal")
    'scanbench.scenarios.tridiagonal:SCENARIO'
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import importlib
import importlib.util
import os
import pickle
import sys
import tempfile
import traceback
import types
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .api import InputError, Scenario, UnknownNameError
from .import_path import import_root, shown, use_import_root
from .ownership import check_owned

CATALOGUE_SOURCE = "scanbench.scenarios:CATALOGUE"  # the bundled scenarios: name -> source
DEFAULT_ATTRIBUTE = "SCENARIO"
PICKLED_SOURCES = "SCANBENCH_PICKLED_SOURCES"  # the run's private folder of .pkl sources


def _split(source: str) -> tuple[str, str]:
    """``(module or path, attribute)``; a file given without ``:ATTR`` means SCENARIO."""
    target, colon, attribute = source.rpartition(":")
    if not colon:
        target, attribute = source, DEFAULT_ATTRIBUTE
    if not target or not attribute.isidentifier():
        raise InputError(
            f"scenario source {source!r}: expected MODULE:ATTR or PATH.py:ATTR, "
            "e.g. scanbench.scenarios.tridiagonal:SCENARIO or my_scenario.py:SCENARIO"
        )
    return target, attribute


def file_source(path: str | Path, attribute: str = DEFAULT_ATTRIBUTE) -> str:
    """The source of ``attribute`` in the Python file at ``path`` (made absolute)."""
    return f"{Path(path).resolve()}:{attribute}"


def _where_in(source: Path, error: BaseException, label: str | Path) -> str:
    """``file:line`` of the deepest frame of ``error``'s traceback inside ``source``."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == str(source)]
    return f"{label}:{frames[-1].lineno}" if frames else str(label)


def _import_file(path: str) -> Any:
    """Import a Python file as a module; one line naming ``file:line`` when it fails."""
    source = Path(path).resolve()
    path = shown(source)  # as the user sees it: ./bench/scenario.py inside the project
    if not source.is_file():
        raise InputError(f"scenario file {path!r}: no such file")
    # the same name in every process (hash() of a str is salted per process): a Numba
    # function cached by one worker (``cache=True``) names its module, and the next
    # worker must find it under that name
    digest = hashlib.sha1(str(source).encode(), usedforsecurity=False).hexdigest()[:16]
    module_name = f"scanbench_user_scenario_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, source)
    if spec is None or spec.loader is None:
        raise InputError(f"scenario file {path!r}: cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as error:
        sys.modules.pop(module_name, None)
        raise InputError(f"{path}:{error.lineno}: syntax error: {error.msg}") from None
    except Exception as error:
        sys.modules.pop(module_name, None)
        raise InputError(
            f"{_where_in(source, error, path)}: {type(error).__name__}: {error}{_hint(error)}"
        ) from None
    return module


# scanbench's import names before 0.2 -> what to import now
OLD_NAMES = {
    "harness": "scanbench",
    "reports": "scanbench.reports",
    "scenarios": "scanbench.scenarios",
}


def _hint(error: BaseException) -> str:
    """What to do about a module a scenario file could not import: scanbench's old names
    say the new one; any other names where imports come from and the two fixes."""
    if not isinstance(error, ModuleNotFoundError) or not error.name:
        return ""
    if error.name in OLD_NAMES:
        return (
            f"; {error.name!r} is scanbench's import name before 0.2: import "
            f"{OLD_NAMES[error.name]!r} instead (e.g. `from scanbench import Scenario`)"
        )
    return (
        f" (user code is imported from {import_root()} first, then PYTHONPATH and the "
        "installed packages: run scanbench from your project's root, or install the "
        "package, e.g. `pip install -e .`)"
    )


def write_pickled(scenarios: Mapping[str, Scenario], path: str | Path) -> Path:
    """Pickle ``{ATTR: scenario}`` (cloudpickle: lambdas and closures included) to
    ``path``, whose sources are then ``f"{path}:{ATTR}"``.

    Raises:
        InputError: something in a scenario cannot be pickled (named in the message).
    """
    import cloudpickle

    try:
        data = cloudpickle.dumps(dict(scenarios))
    except Exception as error:
        raise InputError(
            f"isolate=True: the functions or arguments cannot be pickled "
            f"({type(error).__name__}: {error}); use isolate=False"
        ) from None
    path = Path(path).resolve()
    path.write_bytes(data)
    return path


@contextlib.contextmanager
def pickle_directory() -> Iterator[Path]:
    """A private folder (`tempfile.mkdtemp`: mode 0700, this user's) for a run's pickled
    sources, named in ``$SCANBENCH_PICKLED_SOURCES`` while the block runs (so the run's
    workers, which inherit it, accept its pickles), removed afterwards."""
    before = os.environ.get(PICKLED_SOURCES)
    with tempfile.TemporaryDirectory(prefix="scanbench-functions-") as directory:
        os.environ[PICKLED_SOURCES] = directory
        try:
            yield Path(directory)
        finally:
            if before is None:
                os.environ.pop(PICKLED_SOURCES, None)
            else:
                os.environ[PICKLED_SOURCES] = before


def _check_pickled(source: str, path: str | Path) -> Path:
    """``path`` (made absolute) when it is a pickle in the run's own private folder.

    Raises:
        InputError: anywhere else, or that folder or file is not private to this user.
    """
    given = Path(os.path.abspath(path))
    folder = Path(os.path.realpath(given.parent))
    allowed = os.environ.get(PICKLED_SOURCES)
    if not allowed or folder != Path(os.path.realpath(allowed)):
        raise InputError(
            f"scenario source {source!r}: a pickled scenario runs code when it is loaded, so "
            "it is accepted only from the run's own private folder (as "
            "scanbench.compare(isolate=True) writes it), not from the command line, a gate "
            "file or a stored run; name the scenario's .py file or module instead"
        )
    check_owned(folder, "the folder of pickled scenario sources", private=True)
    return check_owned(folder / given.name, "pickled scenario source", directory=False)


def _load_pickled(path: str) -> Any:
    """The mapping a `write_pickled` file holds, as a namespace of its keys."""
    import cloudpickle  # noqa: F401 (what the file needs to unpickle)

    _check_pickled(path, path)
    try:
        with open(path, "rb") as handle:
            # the run's own file, in its private folder (checked above)
            return types.SimpleNamespace(**pickle.load(handle))  # noqa: S301
    except OSError as error:
        raise InputError(f"scenario source {path!r}: {error.strerror}") from None
    except Exception as error:
        raise InputError(
            f"scenario source {path!r}: cannot be unpickled ({type(error).__name__}: {error})"
        ) from None


def _import_module(name: str, source: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name and name.startswith(error.name):  # the module itself, not inside it
            raise InputError(f"scenario source {source!r}: no module named {name!r}") from None
        raise


def _attribute(source: str) -> Any:
    target, attribute = _split(source)
    if not target.startswith("scanbench."):  # the user's code: it imports from its root
        use_import_root(import_root())
    if target.endswith(".py"):
        module = _import_file(target)
    elif target.endswith(".pkl"):
        module = _load_pickled(target)
    else:
        module = _import_module(target, source)
    if not hasattr(module, attribute):
        raise InputError(f"scenario source {source!r}: {target} defines no {attribute}")
    return getattr(module, attribute)


@functools.cache
def load(source: str) -> Scenario:
    """The `Scenario` a source names, imported once per process.

    Raises:
        InputError: the module or file does not import (``file:line: message`` for a
            file), or the attribute is missing or not a `scanbench.api.Scenario`.
    """
    scenario = _attribute(source)
    if not isinstance(scenario, Scenario):
        raise InputError(
            f"scenario source {source!r} must name a scanbench.api.Scenario, "
            f"got {type(scenario).__name__}"
        )
    return scenario


@functools.cache
def catalogue() -> Mapping[str, str]:
    """The bundled scenarios: name -> source (from `CATALOGUE_SOURCE`)."""
    return dict(_attribute(CATALOGUE_SOURCE))


def resolve(name_or_source: str) -> str:
    """The source of a catalogue name, or the source given (a file's path made absolute).

    Raises:
        UnknownNameError: neither a catalogue name nor a source string.
    """
    if name_or_source in catalogue():
        return catalogue()[name_or_source]
    if ":" not in name_or_source and not name_or_source.endswith((".py", ".pkl")):
        choices = [*catalogue(), "or a source MODULE:ATTR / PATH.py:ATTR"]
        raise UnknownNameError("scenario", name_or_source, choices)
    target, attribute = _split(name_or_source)
    if target.endswith(".pkl"):
        _check_pickled(name_or_source, target)
    return file_source(target, attribute) if target.endswith((".py", ".pkl")) else name_or_source


def _imports_of(path: Path) -> set[str]:
    """The absolute imports of a Python file (``import x``, ``from x import y``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    names |= {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and not node.level
    }
    return names


def imported_from(source: str) -> dict[str, str]:
    """Where each top-level module the scenario's code imports was loaded from, as
    ``{"mylib": "./mylib/__init__.py"}`` (`scanbench.import_path.shown`; the standard
    library left out): a stale installed copy of the user's package shows up as a path in
    site-packages. Call it after `load`."""
    target, _ = _split(source)
    if target.endswith(".pkl"):
        return {}
    module_file = getattr(sys.modules.get(target), "__file__", None)
    if target.endswith(".py"):
        names = _imports_of(Path(target))
    elif module_file and module_file.endswith(".py"):  # the module, and what it imports
        names = {target} | _imports_of(Path(module_file))
    else:
        names = {target}
    found = {}
    for name in sorted({name.partition(".")[0] for name in names}):
        module = sys.modules.get(name)
        if name in sys.stdlib_module_names or name == "__future__" or module is None:
            continue
        location = getattr(module, "__file__", None) or next(
            iter(getattr(module, "__path__", [])), None
        )
        if location:
            found[name] = shown(location, import_root())
    return found


def shortest(name: str, source: str) -> str:
    """How to name a scenario to `resolve`: its catalogue name when that is its source,
    else the source itself."""
    return name if catalogue().get(name) == source else source

"""Scenario sources: the one way the harness finds a workload.

A *source* is a string naming where a `Scenario` object lives:

- ``package.module:ATTR`` - an attribute of an importable module, e.g.
  ``scenarios.tridiagonal:SCENARIO``;
- ``path/to/file.py:ATTR`` - an attribute of a Python file (a user's own workload); the
  path is made absolute when the source is resolved, so a worker started elsewhere loads
  the same file.

The bundled scenarios are listed in a catalogue that is itself reached through a source
(``scenarios:CATALOGUE``: name -> source), so the harness never imports ``scenarios``
directly. The parent process resolves what the user named (a catalogue name or a source)
to a source string; a cell carries that string, and its worker loads exactly it
(pyperf's worker model).

Example:
    >>> resolve("tridiagonal")
    'scenarios.tridiagonal:SCENARIO'
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.api import InputError, Scenario, UnknownNameError

CATALOGUE_SOURCE = "scenarios:CATALOGUE"  # the bundled scenarios: name -> source
DEFAULT_ATTRIBUTE = "SCENARIO"


def _split(source: str) -> tuple[str, str]:
    """``(module or path, attribute)``; a file given without ``:ATTR`` means SCENARIO."""
    target, colon, attribute = source.rpartition(":")
    if not colon:
        target, attribute = source, DEFAULT_ATTRIBUTE
    if not target or not attribute.isidentifier():
        raise InputError(
            f"scenario source {source!r}: expected MODULE:ATTR or PATH.py:ATTR, "
            "e.g. scenarios.tridiagonal:SCENARIO or my_scenario.py:SCENARIO"
        )
    return target, attribute


def file_source(path: str | Path, attribute: str = DEFAULT_ATTRIBUTE) -> str:
    """The source of ``attribute`` in the Python file at ``path`` (made absolute)."""
    return f"{Path(path).resolve()}:{attribute}"


def _where_in(source: Path, error: BaseException, shown: str | Path) -> str:
    """``file:line`` of the deepest frame of ``error``'s traceback inside ``source``."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == str(source)]
    return f"{shown}:{frames[-1].lineno}" if frames else str(shown)


def _import_file(path: str) -> Any:
    """Import a Python file as a module; one line naming ``file:line`` when it fails."""
    source = Path(path).resolve()
    if not source.is_file():
        raise InputError(f"scenario file {path!r}: no such file")
    module_name = f"scanbench_user_scenario_{abs(hash(str(source)))}"
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
            f"{_where_in(source, error, path)}: {type(error).__name__}: {error}"
        ) from None
    return module


def _import_module(name: str, source: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name and name.startswith(error.name):  # the module itself, not inside it
            raise InputError(f"scenario source {source!r}: no module named {name!r}") from None
        raise


def _attribute(source: str) -> Any:
    target, attribute = _split(source)
    module = _import_file(target) if target.endswith(".py") else _import_module(target, source)
    if not hasattr(module, attribute):
        raise InputError(f"scenario source {source!r}: {target} defines no {attribute}")
    return getattr(module, attribute)


@functools.cache
def load(source: str) -> Scenario:
    """The `Scenario` a source names, imported once per process.

    Raises:
        InputError: the module or file does not import (``file:line: message`` for a
            file), or the attribute is missing or not a `harness.api.Scenario`.
    """
    scenario = _attribute(source)
    if not isinstance(scenario, Scenario):
        raise InputError(
            f"scenario source {source!r} must name a harness.api.Scenario, "
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
    if ":" not in name_or_source and not name_or_source.endswith(".py"):
        choices = [*catalogue(), "or a source MODULE:ATTR / PATH.py:ATTR"]
        raise UnknownNameError("scenario", name_or_source, choices)
    target, attribute = _split(name_or_source)
    return file_source(target, attribute) if target.endswith(".py") else name_or_source


def shortest(name: str, source: str) -> str:
    """How to name a scenario to `resolve`: its catalogue name when that is its source,
    else the source itself."""
    return name if catalogue().get(name) == source else source

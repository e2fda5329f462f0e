"""The optional packages, the install extra that brings each, and one line when missing.

The core install (`pip install scanbench`) measures a user's own JAX functions
(`scanbench.compare`, `scanbench run` of a user's scenario, markdown reports, the gate, the
history without its plots). What only some features need is an extra, listed once here
(`EXTRAS`: import name -> extra); ``tests/engine/test_extras.py`` checks that this table
names every package ``pyproject.toml`` lists outside the core. A feature asks for its
package with `require`, a bundled backend with `missing_reason`: the user gets one line
naming the extra to install, never a traceback.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from types import ModuleType
from typing import TYPE_CHECKING

from .errors import InputError

if TYPE_CHECKING:
    from .api import Backend

# import name -> (the extra that installs it, its distribution's name on PyPI)
EXTRAS: dict[str, tuple[str, str]] = {
    "evosax": ("mppi", "evosax"),  # the MPPI and QD scenarios' JAX CMA-ES
    "cma": ("mppi", "cma"),  # the MPPI scenarios' `library` and Numba backends' CMA-ES
    "ribs": ("mppi", "ribs"),  # the QD scenarios' pyribs-driven backends
    "numba": ("numba", "numba"),  # the bundled Numba backends and the rate kernels
    "matplotlib": ("plots", "matplotlib"),  # HTML reports' and the history's figures
    "submitit": ("slurm", "submitit"),  # `scanbench run --executor slurm|local`
    "ruptures": ("changepoints", "ruptures"),  # `scanbench history report`'s change points
    "pytest_benchmark": ("pytest", "pytest-benchmark"),  # the `scanbench` pytest fixture
}


class MissingExtraError(InputError):
    """A feature whose optional package is not installed; the message names the extra."""


def _top(module: str) -> str:
    top = module.partition(".")[0]
    if top not in EXTRAS:
        raise KeyError(f"{top!r} is not an optional package of scanbench (EXTRAS)")
    return top


def missing_line(module: str, purpose: str) -> str:
    """``"<purpose> need <package>: pip install 'scanbench[<extra>]'"``; ``purpose`` is
    plural ("HTML reports", "the numba backends")."""
    extra, distribution = EXTRAS[_top(module)]
    return f"{purpose} need {distribution}: pip install 'scanbench[{extra}]'"


def available(module: str) -> bool:
    """Whether ``module`` (an `EXTRAS` package) can be imported, without importing it."""
    top = _top(module)
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):  # a finder that refuses it; a None in sys.modules
        return False


def missing_reason(purpose: str, *modules: str) -> str:
    """The line for the first of ``modules`` that is not installed; "" when all are."""
    for module in modules:
        if not available(module):
            return missing_line(module, purpose)
    return ""


def check_html(html: object) -> None:
    """Refuse ``--html`` without matplotlib (the `plots` extra) before anything runs: an
    HTML report is its figures, so none is written without them.

    Raises:
        MissingExtraError: the one line naming the extra.
    """
    if html and not available("matplotlib"):
        raise MissingExtraError(missing_line("matplotlib", "HTML reports (--html)"))


def needing(backend: Backend, purpose: str, *modules: str) -> Backend:
    """``backend``, or, where one of ``modules`` is not installed, the same backend run at
    no size: the runner stores its cells as skipped with the line naming the extra (as a
    backend's ``sizes`` and ``skip_reason`` say, `scanbench.api.Backend`)."""
    reason = missing_reason(purpose, *modules)
    if not reason:
        return backend
    return dataclasses.replace(backend, sizes=frozenset(), skip_reason=reason)


def require(module: str, purpose: str) -> ModuleType:
    """``module`` imported.

    Raises:
        MissingExtraError: it is not installed; the one line names the extra.
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        if error.name is not None and error.name.partition(".")[0] != _top(module):
            raise  # the package is there but one of its own imports failed: its traceback
        raise MissingExtraError(missing_line(module, purpose)) from None

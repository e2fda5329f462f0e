"""scanbench: a benchmark and profiling harness for JAX workloads.

Everything a user needs is a name of this module, listed in ``__all__``: the vocabulary a
scenario file is written in (`Scenario`, `Backend`, `Size`, `Strategy`, `Param`,
`ArchiveMap`), the backend factories (`jax_backend`, `compiled_backend`, `loop_backend`,
`host_backend`, `parametric`), the error types, and the notebook API (`compare`,
`profile`, `report`).
Every submodule (``scanbench.execution``, ``scanbench.probes``, ``scanbench.gate``, ...) is
internal: its names may change in any release.

Example:
    >>> import scanbench
    >>> scanbench.Strategy("scanned")
    <Strategy.SCANNED: 'scanned'>

Importing ``scanbench`` imports neither JAX nor NumPy (every cell's worker process starts
from it): the names that need them load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if __name__ != "scanbench":  # e.g. `import harness` with a checkout of scanbench on the path
    raise ImportError(
        f"scanbench's code was imported as {__name__!r}; import it as `scanbench` "
        "(e.g. `import scanbench` or `from scanbench import Scenario`)"
    )

from .api import DTYPES, Axis, Backend, Param, Record, Scenario, Size, Status, Strategy
from .archive_map import ArchiveMap
from .counts import Counts
from .errors import HarnessError, InputError, MismatchError, StoreError, UnknownNameError

__version__ = "0.2.0"

# name -> the internal module it is loaded from on first use (it imports NumPy or JAX)
_LAZY = {
    "Compiled": ".factories",
    "compiled_backend": ".factories",
    "host_backend": ".factories",
    "chained": ".factories",
    "jax_backend": ".factories",
    "loop_backend": ".factories",
    "parametric": ".factories",
    "TimingConfig": ".sampling",
    "compare": ".notebook",
    "profile": ".notebook",
    "report": ".notebook",
    "Profile": ".notebook",
    "compile_reference": ".execution.reference_cache",
}
_SUBMODULES = {"placement": ".sharding.placement"}

__all__ = [
    "DTYPES",
    "ArchiveMap",
    "Axis",
    "Backend",
    "Compiled",
    "Counts",
    "HarnessError",
    "InputError",
    "MismatchError",
    "Param",
    "Profile",
    "Record",
    "Scenario",
    "Size",
    "Status",
    "StoreError",
    "Strategy",
    "TimingConfig",
    "UnknownNameError",
    "__version__",
    "chained",
    "compare",
    "compile_reference",
    "compiled_backend",
    "host_backend",
    "jax_backend",
    "loop_backend",
    "parametric",
    "placement",
    "profile",
    "report",
]


def __getattr__(name: str) -> Any:
    """The names of `_LAZY` and `_SUBMODULES`, imported on first use (PEP 562)."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(_SUBMODULES[name], __name__)
    else:
        raise AttributeError(f"module 'scanbench' has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # what the lazy names are, for type checkers and IDEs
    from .execution.reference_cache import compile_reference
    from .factories import (
        Compiled,
        chained,
        compiled_backend,
        host_backend,
        jax_backend,
        loop_backend,
        parametric,
    )
    from .notebook import Profile, compare, profile, report
    from .sampling import TimingConfig
    from .sharding import placement

"""Every device-to-host conversion of one call, on every platform, by kind and by caller.

``np.array(x)``, ``float(x)``, ``x.item()``, printing a device array...: on a GPU each is
a device-to-host copy and a synchronisation; on CPU it is zero-copy, so neither the
transfer guard nor the profiler sees most of them (NumPy reads a CPU array through the
buffer protocol, in C). This probe counts them where they are made: for the counted call
it wraps the Python entry points of a conversion,

- NumPy's ``array``, ``asarray``, ``asanyarray``, ``ascontiguousarray``, ``copy`` (a
  device array given to them: the buffer protocol and ``__array__`` paths),
- ``jax.Array``'s ``__array__``, ``__float__``, ``__int__``, ``__bool__``,
  ``__complex__``, ``__index__``, ``item``, ``tolist``, ``__format__``, ``__str__``,
  ``__repr__`` (``float(x)``, ``if x:``, ``print(x)``, f-strings),
- ``jax.device_get``,

counts the outermost one of each conversion (``jax.device_get`` calls ``__array__``: one
conversion) with the function that made it (the nearest frame outside JAX and NumPy),
and restores everything afterwards. What it cannot see: a C extension reading the buffer
directly (``memoryview(x)``) and a NumPy function bound before the call
(``from numpy import asarray``).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

NUMPY_FUNCTIONS = ("array", "asarray", "asanyarray", "ascontiguousarray", "copy")
ARRAY_METHODS = (
    "__array__",
    "__float__",
    "__int__",
    "__bool__",
    "__complex__",
    "__index__",
    "item",
    "tolist",
    "__format__",
    "__str__",
    "__repr__",
)
# how a conversion is named in the counts (the name users write)
KINDS = {
    "__array__": "__array__",
    "__float__": "float",
    "__int__": "int",
    "__bool__": "bool",
    "__complex__": "complex",
    "__index__": "index",
    "item": ".item()",
    "tolist": ".tolist()",
    "__format__": "format",
    "__str__": "str/print",
    "__repr__": "repr",
    "device_get": "jax.device_get",
    **{name: f"np.{name}" for name in NUMPY_FUNCTIONS},
    "wait": "wait",
}
LIBRARIES = ("jax", "jaxlib", "numpy")  # frames of these are not "the caller"
# the harness's own wait for a backend's result (factories: "run returns a ready result")
HARNESS_WAITS = ("scanbench.timing", "scanbench.factories")
WAIT = "wait"


@dataclasses.dataclass(frozen=True)
class Conversions:
    """Conversions of device arrays to host values during the counted calls, and the
    explicit waits (``jax.block_until_ready``, ``x.block_until_ready()``) the code made:
    each stops the host from queueing the next call while the device runs the last."""

    total: int
    by_kind: dict[str, int]
    by_function: dict[str, int]  # "module.function" of the caller
    waits: int = 0
    waits_by_function: dict[str, int] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_state = threading.local()


COMPREHENSIONS = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})


def _caller() -> str:
    """``module.function`` of the nearest frame outside JAX, NumPy and this module (a
    comprehension's frame is its function's: Python 3.11 gives it a frame of its own)."""
    frame = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        top = module.partition(".")[0]
        name = frame.f_code.co_name
        if top not in LIBRARIES and module != __name__ and name not in COMPREHENSIONS:
            return f"{module}.{name}"
        frame = frame.f_back
    return "?"


def _counting(original: Callable, kind: str, is_device_array: Callable[[Any], bool], events):
    def wrapper(*args, **kwargs):
        depth = getattr(_state, "depth", 0)
        if depth == 0 and args and is_device_array(args[0]):
            events.append((KINDS[kind], _caller()))
        _state.depth = depth + 1
        try:
            return original(*args, **kwargs)
        finally:
            _state.depth = depth

    wrapper.__name__ = getattr(original, "__name__", kind)
    wrapper.__doc__ = getattr(original, "__doc__", None)
    return wrapper


def _array_type() -> type | None:
    """The concrete class of ``jax.Array`` (JAX's internal name for it), found without
    making an array: making one inside the counted region would be a dispatch and a
    transfer of its own. None where JAX moved it (then only NumPy's entry points and
    ``jax.device_get`` are counted)."""
    try:
        from jax._src.array import ArrayImpl
    except ImportError:
        return None
    return ArrayImpl


@contextlib.contextmanager
def counting() -> Iterator[list[tuple[str, str]]]:
    """The conversions made while the block runs, as (kind, caller) pairs."""
    import jax
    import numpy as np

    events: list[tuple[str, str]] = []
    array_type = _array_type()

    def is_device_array(value: Any) -> bool:
        return isinstance(value, jax.Array)

    patched: list[tuple[Any, str, Any]] = []
    try:
        for name in NUMPY_FUNCTIONS:
            original = getattr(np, name)
            patched.append((np, name, original))
            setattr(np, name, _counting(original, name, is_device_array, events))
        for name in ARRAY_METHODS if array_type is not None else ():
            original = getattr(array_type, name, None)
            if original is None:
                continue
            patched.append((array_type, name, original))
            setattr(array_type, name, _counting(original, name, is_device_array, events))
        for owner in (jax, array_type):
            original = getattr(owner, "block_until_ready", None)
            if original is None:
                continue
            patched.append((owner, "block_until_ready", original))
            owner.block_until_ready = _counting(original, WAIT, lambda _: True, events)
        original = jax.device_get
        patched.append((jax, "device_get", original))
        jax.device_get = _counting(
            original,
            "device_get",
            lambda tree: any(is_device_array(x) for x in jax.tree.leaves(tree)),
            events,
        )
        yield events
    finally:
        for owner, name, original in reversed(patched):
            setattr(owner, name, original)


def summarize(events: list[tuple[str, str]]) -> Conversions:
    """The (kind, caller) pairs `counting` collected, counted; the harness's own waits
    for a backend's result are left out."""
    waits = [
        caller
        for kind, caller in events
        if kind == WAIT and not caller.rpartition(".")[0].startswith(HARNESS_WAITS)
    ]
    made = [(kind, caller) for kind, caller in events if kind != WAIT]
    kinds = collections.Counter(kind for kind, _ in made)
    callers = collections.Counter(caller for _, caller in made)
    by_wait = collections.Counter(waits)
    return Conversions(
        len(made),
        dict(sorted(kinds.items())),
        dict(sorted(callers.items())),
        len(waits),
        dict(sorted(by_wait.items())),
    )


def count_conversions(call: Callable[[], Any]) -> Conversions:
    """The device-to-host conversions ``call()`` makes (see the module doc)."""
    with counting() as events:
        call()
    return summarize(events)

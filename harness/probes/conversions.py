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
and restores everything afterwards. Explicit waits (``block_until_ready``) are counted
the same way, and each is also told *pending* when a device array it was given was still
being computed (``not x.is_ready()``): XLA:CPU runs a small executable inline on the
calling thread, so a wait after it finds the value ready and costs only its Python call.
The pending count depends on timing (it is a measurement, not a gated count).

What it cannot see: a C extension reading the buffer directly (``memoryview(x)``) and a
NumPy function bound before the call (``from numpy import asarray``).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np

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
# the name of the code's own waits in a profiler trace: `scanbench.probes.spans` reads
# how long the device was idle inside them
WAIT_EVENT = "scanbench wait"
WAIT = "wait"
PENDING = "wait (pending)"  # a wait that found a value still being computed


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
    # measurements, not counts (None: older records): the waits that found a value still
    # being computed, and the seconds the host spent inside the waits
    pending_waits: int | None = None
    waited_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Made:
    """What `counting` collects: (kind, caller) pairs, and the seconds each of the code's
    own waits took."""

    events: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    waited_s: list[float] = dataclasses.field(default_factory=list)


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


def _own(caller: str) -> bool:
    """Whether a wait is the code's own, not the harness's wait for a backend's result."""
    return not caller.rpartition(".")[0].startswith(HARNESS_WAITS)


def _is_pending(tree: Any) -> bool:
    """Whether a device array of ``tree`` is still being computed."""
    return any(
        isinstance(leaf, jax.Array) and not leaf.is_ready() for leaf in jax.tree.leaves(tree)
    )


def _waiting(original: Callable, events, waited_s: list[float]):
    """``block_until_ready`` counted as a wait, as pending when it will sleep, and timed
    (``waited_s``: the host's seconds inside the code's own waits); each of the code's
    own waits is also an annotated span of the profiler's trace (`WAIT_EVENT`)."""
    import jax

    def wrapper(*args, **kwargs):
        depth = getattr(_state, "depth", 0)
        if depth > 0:
            return original(*args, **kwargs)
        caller = _caller()
        events.append((WAIT, caller))
        if _is_pending(args):
            events.append((PENDING, caller))
        _state.depth = depth + 1
        own = _own(caller)
        start = time.perf_counter()
        try:
            if not own:
                return original(*args, **kwargs)
            with jax.profiler.TraceAnnotation(WAIT_EVENT):  # placed in the trace, if any
                return original(*args, **kwargs)
        finally:
            if own:
                waited_s.append(time.perf_counter() - start)
            _state.depth = depth

    wrapper.__name__ = getattr(original, "__name__", WAIT)
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
def counting() -> Iterator[Made]:
    """The conversions and waits made while the block runs (`Made`)."""
    made = Made()
    events = made.events
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
            owner.block_until_ready = _waiting(original, events, made.waited_s)
        original = jax.device_get
        patched.append((jax, "device_get", original))
        jax.device_get = _counting(
            original,
            "device_get",
            lambda tree: any(is_device_array(x) for x in jax.tree.leaves(tree)),
            events,
        )
        yield made
    finally:
        for owner, name, original in reversed(patched):
            setattr(owner, name, original)


def summarize(made: Made) -> Conversions:
    """What `counting` collected, counted; the harness's own waits for a backend's result
    are left out."""
    waits = [caller for kind, caller in made.events if kind == WAIT and _own(caller)]
    pending = [caller for kind, caller in made.events if kind == PENDING and _own(caller)]
    converted = [(kind, caller) for kind, caller in made.events if kind not in (WAIT, PENDING)]
    kinds = collections.Counter(kind for kind, _ in converted)
    callers = collections.Counter(caller for _, caller in converted)
    by_wait = collections.Counter(waits)
    return Conversions(
        len(converted),
        dict(sorted(kinds.items())),
        dict(sorted(callers.items())),
        len(waits),
        dict(sorted(by_wait.items())),
        len(pending),
        sum(made.waited_s),
    )


def count_conversions(call: Callable[[], Any]) -> Conversions:
    """The device-to-host conversions ``call()`` makes (see the module doc)."""
    with counting() as made:
        call()
    return summarize(made)

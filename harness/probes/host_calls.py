"""Where one call's host time goes, by function: the backend's own functions and the
library functions its code calls.

Host code (NumPy, SciPy, Numba, a Python optimizer such as ``cma`` around a jitted
evaluation) has no XLA trace to say where its time is. One extra call runs under
``sys.setprofile`` and charges the wall time between consecutive profile events to the
function on top of a stack that holds:

- the backend's **own functions** (`scanbench.probes.lines.is_own`: its own files and the
  bundled scenarios), each charged its *exclusive* time (what it does itself, between the
  calls it makes). A Numba kernel called from own code reports a call of its Python
  function's code (Numba tells profilers so): its time is charged to that function, named
  as own code. A jitted JAX function is called through C++ and reports nothing: its
  dispatch and execution are charged to the own function that calls it;
- the **library functions own code calls** (a Python function of an installed package, or
  a C function such as ``numpy.dot``), each charged its *inclusive* time: everything the
  library does until it returns to own code is the library's.

Code above the backend (scanbench's engine calling it) is charged to none of them; it is
the wall time of the call less their sum (``outside_s``).

The profile hook runs on every call event, inside libraries too, and costs time. Its
cost per event is measured in the same process (a loop of calls from own code into a
trivial function, with and without the hook) and taken out of each function's time
(``events x event_s``); what is stored is an estimate of the unprofiled call's time by
function, and the shares are what the diagnosis cites. A Python-heavy library (many
small calls) is where the estimate is least sure: its events are listed beside it.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .lines import is_own

KEPT = 8  # functions kept, most time first
CALIBRATION_CALLS = 5_000  # x2 paths x3 repeats: about 50 ms a cell


@dataclasses.dataclass(frozen=True)
class HostFunction:
    """One function's share of a profiled call."""

    name: str  # ``module.qualname`` (a library's) or ``file.py:function`` (own code)
    own: bool  # the backend's own code (exclusive time) or a library's (inclusive)
    seconds: float  # the hook's cost taken out
    calls: int
    events: int  # profile events charged to it (its estimate's weight)


@dataclasses.dataclass(frozen=True)
class HostCalls:
    """The profiled call's wall time and its time by function (see the module doc)."""

    wall_s: float
    event_s: float  # the hook's measured cost of one event in own code
    library_event_s: float  # ... and of one inside a library
    events: int
    functions: tuple[HostFunction, ...]  # most time first, `KEPT` at most
    profiled_s: float  # the time of every function, summed (not only those kept)

    def to_json(self) -> dict[str, Any]:
        return {
            "wall_s": self.wall_s,
            "event_s": self.event_s,
            "library_event_s": self.library_event_s,
            "events": self.events,
            "profiled_s": self.profiled_s,
            "functions": [dataclasses.asdict(f) for f in self.functions],
        }


def _library_name(code: Any, frame: Any) -> str:
    module = frame.f_globals.get("__name__", "") or Path(code.co_filename).stem
    return f"{module}.{getattr(code, 'co_qualname', code.co_name)}"


def _c_name(function: Any) -> str:
    module = getattr(function, "__module__", None)
    owner = getattr(function, "__self__", None)
    if module is None and owner is not None and not isinstance(owner, type(sys)):
        module = type(owner).__module__ + "." + type(owner).__qualname__
    elif module is None and owner is not None:
        module = owner.__name__
    return f"{module or 'builtins'}.{getattr(function, '__name__', repr(function))}"


def _own_name(code: Any) -> str:
    return f"{Path(code.co_filename).name}:{getattr(code, 'co_qualname', code.co_name)}"


class _Profiler:
    """The profile hook and what it charged (see the module doc)."""

    OUTSIDE = ("", False)

    def __init__(self, is_own: Callable[[Any], bool]) -> None:
        self.is_own = is_own  # of a frame
        self.seconds: collections.Counter[tuple[str, bool]] = collections.Counter()
        self.calls: collections.Counter[tuple[str, bool]] = collections.Counter()
        self.events: collections.Counter[tuple[str, bool]] = collections.Counter()
        # (key, frame, C function or None, whether own code)
        self.stack: list[tuple[tuple[str, bool], Any, Any, bool]] = []
        self.last = time.perf_counter()

    def hook(self, frame: Any, event: str, arg: Any) -> None:
        now = time.perf_counter()
        top = self.stack[-1] if self.stack else None
        key = top[0] if top is not None else self.OUTSIDE
        self.seconds[key] += now - self.last
        self.events[key] += 1
        if top is not None and not top[3]:  # inside a library: wait for its return
            if (event == "return" and top[2] is None and frame is top[1]) or (
                event in ("c_return", "c_exception") and frame is top[1] and arg is top[2]
            ):
                self.stack.pop()
            self.last = time.perf_counter()
            return
        if event == "call":
            if self.is_own(frame):
                self._push((_own_name(frame.f_code), True), frame, None, True)
            elif top is not None:  # a library function called from own code
                self._push((_library_name(frame.f_code, frame), False), frame, None, False)
        elif event == "c_call" and top is not None:  # own code calls a C function
            self._push((_c_name(arg), False), frame, arg, False)
        elif event == "return" and top is not None and frame is top[1]:
            self.stack.pop()
        self.last = time.perf_counter()

    def _push(self, key: tuple[str, bool], frame: Any, function: Any, own: bool) -> None:
        self.calls[key] += 1
        self.stack.append((key, frame, function, own))


def _noop() -> None:
    return None


def _inner(calls: int) -> None:
    for _ in range(calls):
        _noop()


def event_cost(calls: int = CALIBRATION_CALLS) -> tuple[float, float]:
    """Seconds of the hook's cost that each event leaves in the charged times, (in own
    code, inside a library): ``calls`` calls from own code into a trivial library
    function, then one library call that makes ``calls`` calls itself, each against its
    time without the hook; the least of three (the hook's own work between its two clock
    readings is never charged)."""

    def loop() -> None:
        for _ in range(calls):
            _noop()

    def library() -> None:
        _inner(calls)

    costs = []
    for run in (loop, library):
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            run()
            bare = time.perf_counter() - start
            profiler = _Profiler(lambda frame, code=run.__code__: frame.f_code is code)
            previous = sys.getprofile()
            profiler.last = time.perf_counter()
            sys.setprofile(profiler.hook)
            try:
                run()
            finally:
                sys.setprofile(previous)
            charged = sum(profiler.seconds.values())
            best = min(best, (charged - bare) / max(sum(profiler.events.values()), 1))
        costs.append(max(best, 0.0))
    return costs[0], costs[1]


@functools.cache
def _process_event_cost() -> tuple[float, float]:
    """`event_cost`, measured once per process (every profiled call of a `compare()`
    or a worker reads the same hook on the same interpreter)."""
    return event_cost()


def profile_call(
    call: Callable[[], Any],
    own: Callable[[str, str], bool] = is_own,
    event_s: tuple[float, float] | None = None,
) -> HostCalls:
    """``call()`` once under the profile hook: its time by function (see the module doc)."""
    own_cost, library_cost = _process_event_cost() if event_s is None else event_s
    verdicts: dict[tuple[str, str], bool] = {}

    def is_own_frame(frame: Any) -> bool:
        key = (frame.f_code.co_filename, frame.f_globals.get("__name__", ""))
        verdict = verdicts.get(key)
        if verdict is None:
            verdict = verdicts[key] = own(*key)
        return verdict

    profiler = _Profiler(is_own_frame)
    previous = sys.getprofile()
    start = time.perf_counter()
    profiler.last = start
    sys.setprofile(profiler.hook)
    try:
        call()
    finally:
        sys.setprofile(previous)

    def unprofiled(key: tuple[str, bool], seconds: float) -> float:
        cost = library_cost if key[0] and not key[1] else own_cost
        return max(seconds - profiler.events[key] * cost, 0.0)

    functions = [
        HostFunction(
            key[0], key[1], unprofiled(key, seconds), profiler.calls[key], profiler.events[key]
        )
        for key, seconds in profiler.seconds.items()
        if key != _Profiler.OUTSIDE
    ]
    functions.sort(key=lambda f: -f.seconds)
    outside = unprofiled(_Profiler.OUTSIDE, profiler.seconds[_Profiler.OUTSIDE])
    return HostCalls(
        wall_s=outside + sum(f.seconds for f in functions),
        event_s=own_cost,
        library_event_s=library_cost,
        events=sum(profiler.events.values()),
        functions=tuple(functions[:KEPT]),
        profiled_s=sum(f.seconds for f in functions),
    )

"""Tracing and compilation inside a call, from ``jax.monitoring`` duration events.

JAX reports every trace (``/jax/core/compile/jaxpr_trace_duration``), lowering to MLIR
(``.../jaxpr_to_mlir_module_duration``) and XLA compilation
(``.../backend_compile_duration``) with its duration. A backend that retraces on every
call (an eager loop whose internal ``lax.scan`` is rebuilt each time, a ``jax.jit`` made
inside the loop, a shape that changes) pays these in the timed call; this probe counts
them and sums their time for one call, so the decomposition can name them. A warm,
compiled backend has none.

Which function recompiled, and why: each event names its function (``jit(scan)``), and
during the counted call ``jax_explain_cache_misses`` is on, so JAX logs every tracing
cache miss with where the call was made and why the cache missed ("never seen function:
<lambda> ... maybe the function is being re-defined repeatedly"). Both are kept, grouped
(`Compilations.by_function`, `Compilations.misses`): the diagnosis names the function,
the place and the reason.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.monitoring

EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "compile",
}

_lock = threading.Lock()
# collectors of the calls being counted: (kind, seconds, function, monotonic time it ended)
_active: list[list[tuple[str, float, str, float]]] = []
_registered = False
MISS = re.compile(r"CACHE MISS at (?P<where>\S+) \((?P<caller>[^)]*)\):\s*(?P<reason>.*)", re.S)


def _listener(event: str, duration_secs: float, **kwargs: Any) -> None:
    kind = EVENTS.get(event)
    if kind is None:
        return
    function = str(kwargs.get("fun_name") or "?")
    ended = time.monotonic()
    with _lock:
        for collector in _active:
            collector.append((kind, float(duration_secs), function, ended))


class _Misses(logging.Handler):
    """Collects the cache-miss explanations JAX logs while a call is counted."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.found: list[tuple[str, str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        match = MISS.search(record.getMessage())
        if match:
            reason = " ".join(line.strip() for line in match["reason"].splitlines() if line.strip())
            self.found.append((match["where"], match["caller"], reason))


@contextlib.contextmanager
def _explained() -> Iterator[_Misses]:
    """``jax_explain_cache_misses`` on, its messages collected (not printed), then off."""
    handler = _Misses()
    logger = logging.getLogger("jax")
    before = jax.config.jax_explain_cache_misses
    jax.config.update("jax_explain_cache_misses", True)
    logger.addHandler(handler)
    propagate, logger.propagate = logger.propagate, False
    try:
        yield handler
    finally:
        logger.propagate = propagate
        logger.removeHandler(handler)
        jax.config.update("jax_explain_cache_misses", before)


def _register() -> None:
    """One process-wide listener (jax.monitoring has no public way to remove one)."""
    global _registered
    if not _registered:
        jax.monitoring.register_event_duration_secs_listener(_listener)
        _registered = True


@dataclasses.dataclass(frozen=True)
class Compilations:
    """Traces, lowerings and XLA compilations during the counted calls, and their time."""

    traces: int = 0
    lowerings: int = 0
    compiles: int = 0
    trace_s: float = 0.0
    lower_s: float = 0.0
    compile_s: float = 0.0
    # function -> {"trace": n, "lower": n, "compile": n}
    by_function: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    # [{"where": file:line:col, "caller": function, "reason": ..., "count": n}], most first
    misses: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    @property
    def total_s(self) -> float:
        return self.trace_s + self.lower_s + self.compile_s

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "total_s": self.total_s}

    @classmethod
    def from_events(
        cls, events: list[tuple[str, float, str, float]], misses: list[tuple[str, str, str]] = ()
    ) -> Compilations:
        count = {kind: 0 for kind in ("trace", "lower", "compile")}
        seconds = {kind: 0.0 for kind in count}
        by_function: dict[str, dict[str, int]] = {}
        for kind, duration, function, _ in events:
            count[kind] += 1
            seconds[kind] += duration
            name = function.removeprefix("jit(").removesuffix(")")  # trace and compile agree
            kinds = by_function.setdefault(name, dict.fromkeys(("trace", "lower", "compile"), 0))
            kinds[kind] += 1
        grouped = collections.Counter((where, caller) for where, caller, _ in misses)
        reasons: dict[tuple[str, str], str] = {}
        for where, caller, reason in misses:  # the fullest explanation of each place
            reason = re.sub(r" id=\d+", "", reason)
            if len(reason) > len(reasons.get((where, caller), "")):
                reasons[(where, caller)] = reason
        return cls(
            count["trace"],
            count["lower"],
            count["compile"],
            seconds["trace"],
            seconds["lower"],
            seconds["compile"],
            dict(sorted(by_function.items(), key=lambda item: -sum(item[1].values()))),
            [
                {"where": where, "caller": caller, "reason": reasons[(where, caller)], "count": n}
                for (where, caller), n in grouped.most_common()
            ],
        )


@contextlib.contextmanager
def _collecting() -> Iterator[list[tuple[str, float, str, float]]]:
    """The trace, lowering and compile events while the block runs, as they end."""
    _register()
    collector: list[tuple[str, float, str, float]] = []
    with _lock:
        _active.append(collector)
    try:
        yield collector
    finally:
        with _lock:
            _active.remove(collector)


def count_compilations(call: Callable[[], Any]) -> Compilations:
    """Traces and compilations (with their durations) while ``call()`` runs."""
    with _collecting() as collector, _explained() as explained:
        call()
    return Compilations.from_events(collector, explained.found)


STAGES = ("trace", "lower", "compile")


@dataclasses.dataclass(frozen=True)
class CompileStages:
    """Where the time to a first result went, by JAX's own stages: tracing the function
    to a jaxpr, lowering it to StableHLO, XLA's compile, and the rest (placing the
    inputs, host work, Numba's compile, what JAX reports no event for), per phase
    (``prepare``, ``first_call``); the seconds the runner paused the worker are left
    out of each (`scanbench.execution.overlap`)."""

    trace_s: float = 0.0
    lower_s: float = 0.0
    compile_s: float = 0.0
    rest_s: float = 0.0
    compiles: int = 0

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def stages_of(
    events: list[tuple[str, float, str, float]],
    total_s: float,
    paused: Callable[[float, float], float] = lambda start, end: 0.0,
) -> CompileStages:
    """The stages of a phase that took ``total_s`` (its pauses left out), from the events
    that ended in it; each event's time less the pauses inside it (``paused(start, end)``
    on the monotonic clock); the rest is what no event accounts for (at least 0)."""
    seconds = dict.fromkeys(STAGES, 0.0)
    compiles = 0
    for kind, duration, _, ended in events:
        seconds[kind] += max(duration - paused(ended - duration, ended), 0.0)
        compiles += kind == "compile"
    rest = max(total_s - sum(seconds.values()), 0.0)
    return CompileStages(seconds["trace"], seconds["lower"], seconds["compile"], rest, compiles)


@contextlib.contextmanager
def compile_events() -> Iterator[list[tuple[str, float, str, float]]]:
    """The trace, lowering and compile events while the block runs (`stages_of` splits
    them by phase), without asking JAX to explain cache misses."""
    with _collecting() as collector:
        yield collector

"""Tracing and compilation inside a call, from ``jax.monitoring`` duration events.

JAX reports every trace (``/jax/core/compile/jaxpr_trace_duration``), lowering to MLIR
(``.../jaxpr_to_mlir_module_duration``) and XLA compilation
(``.../backend_compile_duration``) with its duration. A backend that retraces on every
call (an eager loop whose internal ``lax.scan`` is rebuilt each time, a ``jax.jit`` made
inside the loop, a shape that changes) pays these in the timed call; this probe counts
them and sums their time for one call, so the decomposition can name them. A warm,
compiled backend has none.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "compile",
}

_lock = threading.Lock()
_active: list[list[tuple[str, float]]] = []  # collectors of the calls being counted
_registered = False


def _listener(event: str, duration_secs: float, **kwargs: Any) -> None:
    kind = EVENTS.get(event)
    if kind is None:
        return
    with _lock:
        for collector in _active:
            collector.append((kind, float(duration_secs)))


def _register() -> None:
    """One process-wide listener (jax.monitoring has no public way to remove one)."""
    global _registered
    if not _registered:
        import jax.monitoring

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

    @property
    def total_s(self) -> float:
        return self.trace_s + self.lower_s + self.compile_s

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "total_s": self.total_s}

    @classmethod
    def from_events(cls, events: list[tuple[str, float]]) -> Compilations:
        count = {kind: 0 for kind in ("trace", "lower", "compile")}
        seconds = {kind: 0.0 for kind in count}
        for kind, duration in events:
            count[kind] += 1
            seconds[kind] += duration
        return cls(
            count["trace"],
            count["lower"],
            count["compile"],
            seconds["trace"],
            seconds["lower"],
            seconds["compile"],
        )


def count_compilations(call: Callable[[], Any]) -> Compilations:
    """Traces and compilations (with their durations) while ``call()`` runs."""
    _register()
    collector: list[tuple[str, float]] = []
    with _lock:
        _active.append(collector)
    try:
        call()
    finally:
        with _lock:
            _active.remove(collector)
    return Compilations.from_events(collector)

"""Dispatch, execution and kernel counts from a ``jax.profiler`` trace.

Recording uses ``jax.profiler.trace(tmpdir)`` and reads the ``*.xplane.pb`` back with
``jax.profiler.ProfileData.from_file`` (both exist on jax 0.10 and later; the in-memory
``ProfileSession`` only on newer jax). Counting is a pure function over a flat list of
``TraceEvent`` tuples, so it is tested with synthetic events.

What is counted (XLA:CPU; GPU planes are handled by ``scanbench.probes.gpu``):
- **executions**: ``CommonPjRtLoadedExecutable::Execute*`` events on the host plane (one
  per executable launch per device; ``ExecutePrepare`` is a phase, not a launch);
- **dispatches**: launches from the host: each ``PjitFunction(<name>)`` event that is not
  nested in another one (they nest: the C++ fast path and its fallback both record one)
  and contains at least one execution, plus executions outside any ``PjitFunction``
  (ahead-of-time compiled calls, eager ops on some versions). The per-function breakdown
  names the function, or the HLO module for unattributed launches;
- **kernels**: thunk events carrying an ``hlo_op`` stat, minus ``end:`` markers and
  ``while``/``conditional`` containers, broken down by HLO module and op;
- **device puts**: ``DevicePut`` events (host arrays placed on a device by JAX);
- **executions per device** (a launch over several devices, e.g. a sharded executable):
  one ``[i] CommonPjRtLoadedExecutable::Execute`` event per device ``i`` on the client's
  worker threads (the trace stays open `SETTLE_S` after the block, or the last device's
  event can be lost). Kernels are not split by device: inner-loop thunks run on shared pool
  threads that carry no device; kernels / devices is their mean per device.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import dataclasses
import gc
import glob
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

HOST_PLANE = "/host:CPU"
EXECUTE_PREFIX = "CommonPjRtLoadedExecutable::Execute"
EXECUTE_PHASES = ("CommonPjRtLoadedExecutable::ExecutePrepare",)
END_MARKER = "end: "
HOST_STATS = ("hlo_op", "hlo_module")  # the stats read from host-plane events
HLO_NAME = re.compile(r"^[\w.\-]+$")  # what an HLO instruction may be called
PJIT = re.compile(r"^PjitFunction\((?P<name>.*)\)$")
CONTAINER = re.compile(r"^(while|conditional)(\.\d+)?$")
DEVICE_EXECUTE = re.compile(r"^\[(?P<device>\d+)\] CommonPjRtLoadedExecutable::Execute")
# How long the trace stays open after the traced block returns. A launch over several
# devices runs devices 1.. on the client's worker threads, whose ``[i] ...Execute`` scope
# closes only *after* the output is marked ready: stopping the trace at once now and then
# loses one device's event (performance log, 2026-11-23, "The trace stays open after the
# traced call"). Nothing is launched while it waits, so it adds no events.
SETTLE_S = 0.02


class TraceEvent(NamedTuple):
    """One event of an XSpace trace, flattened."""

    plane: str
    line: str
    name: str
    start_ns: float
    duration_ns: float
    stats: Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class TraceCounts:
    """Counts over one traced region (divide by the number of calls for per-call)."""

    dispatches: int
    executions: int
    kernels: int
    device_puts: int
    dispatches_by_function: Mapping[str, int]
    kernels_by_module: Mapping[str, int]
    kernels_by_op: Mapping[str, int]
    executions_by_device: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "dispatches": self.dispatches,
            "executions": self.executions,
            "kernels": self.kernels,
            "device_puts": self.device_puts,
            "dispatches_by_function": dict(self.dispatches_by_function),
            "kernels_by_module": dict(self.kernels_by_module),
            "kernels_by_op": dict(self.kernels_by_op),
            "executions_by_device": dict(self.executions_by_device),
        }


def is_execution(name: str) -> bool:
    return name.startswith(EXECUTE_PREFIX) and name not in EXECUTE_PHASES


def is_kernel(event: TraceEvent) -> bool:
    return (
        "hlo_op" in event.stats
        and not event.name.startswith("end:")
        and not CONTAINER.match(event.name)
    )


def _outermost(intervals: list[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
    """Intervals (start, end, name) not contained in an earlier one; input sorted."""
    kept: list[tuple[float, float, str]] = []
    for start, end, name in intervals:
        if kept and start >= kept[-1][0] and end <= kept[-1][1]:
            continue
        kept.append((start, end, name))
    return kept


def _module_at(kernels: list[tuple[float, str]], start: float, end: float) -> str | None:
    """The HLO module of the first kernel that starts within [start, end]."""
    index = bisect.bisect_left(kernels, (start, ""))
    if index < len(kernels) and kernels[index][0] <= end:
        return kernels[index][1]
    return None


def count_events(events: Iterable[TraceEvent], host_plane: str = HOST_PLANE) -> TraceCounts:
    """Count dispatches, executions, kernels and device puts (pure; see module doc)."""
    with gc_paused():
        return _count_events(events, host_plane)


def _count_events(events: Iterable[TraceEvent], host_plane: str) -> TraceCounts:
    host = [event for event in events if event.plane == host_plane]
    kernels_by_module: collections.Counter[str] = collections.Counter()
    kernels_by_op: collections.Counter[str] = collections.Counter()
    kernel_starts: list[tuple[float, str]] = []
    for event in host:
        if is_kernel(event):
            module = str(event.stats.get("hlo_module", "?"))
            kernels_by_module[module] += 1
            kernels_by_op[f"{module}/{event.name}"] += 1
            kernel_starts.append((event.start_ns, module))
    kernel_starts.sort()

    by_line: dict[str, list[TraceEvent]] = collections.defaultdict(list)
    for event in host:
        by_line[event.line].append(event)
    dispatches_by_function: collections.Counter[str] = collections.Counter()
    executions_by_device = _executions_by_device(host)
    executions = device_puts = 0
    for line_events in by_line.values():
        line_events.sort(key=lambda e: (e.start_ns, -e.duration_ns))
        pjit = [
            (e.start_ns, e.start_ns + e.duration_ns, PJIT.match(e.name).group("name"))
            for e in line_events
            if PJIT.match(e.name)
        ]
        outer = _outermost(pjit)
        starts = [start for start, _, _ in outer]
        used: set[int] = set()
        for event in line_events:
            if event.name == "DevicePut":
                device_puts += 1
            if not is_execution(event.name):
                continue
            executions += 1
            index = bisect.bisect_right(starts, event.start_ns) - 1
            if index >= 0 and event.start_ns + event.duration_ns <= outer[index][1]:
                if index not in used:
                    used.add(index)
                    dispatches_by_function[outer[index][2]] += 1
                continue
            end = event.start_ns + event.duration_ns
            module = _module_at(kernel_starts, event.start_ns, end) or "<unattributed>"
            dispatches_by_function[module] += 1
    return TraceCounts(
        dispatches=sum(dispatches_by_function.values()),
        executions=executions,
        kernels=sum(kernels_by_module.values()),
        device_puts=device_puts,
        dispatches_by_function=dict(dispatches_by_function.most_common()),
        kernels_by_module=dict(kernels_by_module.most_common()),
        kernels_by_op=dict(kernels_by_op.most_common()),
        executions_by_device=executions_by_device,
    )


def _executions_by_device(host: Iterable[TraceEvent]) -> dict[str, int]:
    """Per-device launches (``[i] ...Execute`` events), keyed by device index."""
    counts = collections.Counter(
        match.group("device") for e in host if (match := DEVICE_EXECUTE.match(e.name))
    )
    return {device: counts[device] for device in sorted(counts, key=int)}


def flatten(profile: Any) -> list[TraceEvent]:
    """Flatten a ``jax.profiler.ProfileData`` into TraceEvents.

    The host plane's ``end: <op>`` markers (one per XLA:CPU thunk, half of a loop
    backend's events) count as nothing and are dropped before their stats are read
    (reading stats is most of the cost). On that plane only events
    named like an HLO instruction (``fusion.3``, ``copy``; not ``PjitFunction(f)`` or
    ``Wait for usage holds``) can be kernels, so only theirs have their stats read (a few
    percent more), and only those read there (`HOST_STATS`, two of a thunk's eight); a
    plain loop into a list, with the cyclic garbage collector paused (`gc_paused`). What
    each of these saved is in the performance log (2026-11-23, "Cheaper counting" and
    "Exact counts and cheaper workers").
    """
    events: list[TraceEvent] = []
    with gc_paused():
        _flatten_into(profile, events)
    return events


def _flatten_into(profile: Any, events: list[TraceEvent]) -> None:
    """`flatten`'s loop (names bound locally: this runs once per event)."""
    append, event_of, hlo_name, host_stats = events.append, TraceEvent, HLO_NAME.match, _host_stats
    for plane in profile.planes:
        plane_name = plane.name
        host = plane_name == HOST_PLANE
        for line in plane.lines:
            line_name = line.name
            for event in line.events:
                name = event.name
                if not host:
                    stats = dict(event.stats)
                elif name.startswith(END_MARKER):
                    continue
                elif hlo_name(name):
                    stats = host_stats(event.stats)
                else:
                    stats = {}
                start, duration = float(event.start_ns), float(event.duration_ns)
                append(event_of(plane_name, line_name, name, start, duration, stats))


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a million acyclic records are made
    (each allocation batch would otherwise rescan all of them)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _host_stats(stats: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """The `HOST_STATS` among an event's stats, read no further than needed."""
    found: dict[str, Any] = {}
    for key, value in stats:
        if key in HOST_STATS:
            found[key] = value
            if len(found) == len(HOST_STATS):
                break
    return found


@contextlib.contextmanager
def recording(log_dir: str | None = None) -> Iterator[list[TraceEvent]]:
    """Record a ``jax.profiler`` trace of the block; the list is filled on exit.

    Args:
        log_dir: keep the trace there (XProf/TensorBoard layout, plus a
            ``perfetto_trace.json.gz`` for ui.perfetto.dev); a temp dir otherwise.
    """
    import jax

    events: list[TraceEvent] = []
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0
    with contextlib.ExitStack() as stack:
        directory = log_dir or stack.enter_context(tempfile.TemporaryDirectory())
        keep = log_dir is not None
        with jax.profiler.trace(directory, create_perfetto_trace=keep, profiler_options=options):
            yield events
            time.sleep(SETTLE_S)  # let worker threads close their scopes (see SETTLE_S)
        files = sorted(
            glob.glob(os.path.join(directory, "**", "*.xplane.pb"), recursive=True),
            key=os.path.getmtime,
        )
        if not files:
            raise RuntimeError(f"jax.profiler.trace wrote no *.xplane.pb under {directory}")
        events.extend(flatten(jax.profiler.ProfileData.from_file(files[-1])))


def trace_calls(
    run: Callable[[Any], Any],
    prepared: Any,
    calls: int = 1,
    block: Callable[[Any], Any] | None = None,
    log_dir: str | None = None,
) -> tuple[TraceCounts, Sequence[TraceEvent]]:
    """Trace ``calls`` calls of ``run(prepared)`` (each waited for) and count them."""
    import jax

    wait = block or jax.block_until_ready
    with recording(log_dir) as events:
        for _ in range(calls):
            wait(run(prepared))
    return count_events(events), events

"""Measured time spans of one traced call: device-busy time and host conversions.

The counts say *how many* dispatches, kernels and transfers a call makes; this module
reads from the same trace *how long* the devices were busy, so the decomposition measures
device work instead of leaving it in a remainder (pure functions over ``TraceEvent``
tuples, tested on synthetic events):

- **device busy** on CPU: the time an XLA program was executing off the threads that
  dispatch (those with ``PjitFunction`` events): the union of the
  ``ThunkExecutor::Execute`` events (one per asynchronous execution, on the client's
  threads), of their ``(wait for completion)`` while the intra-op pool runs the thunks
  (a scan's call can spend a good part of its time there without a kernel event:
  performance log, 2026-11-23, "The decomposition measured"), and
  of the kernel (thunk) events `scanbench.probes.trace.is_kernel` counts.
  Within it, **kernel busy** is the union of the kernels alone: the difference is the
  thunk executor's own time between kernels (on CPU, what a kernel launch costs). The
  kernels are not split by device on CPU (the trace does not say which virtual device a
  pool thread works for): one union over all of them, the time at least one device was
  executing. On GPU: per ``/device:GPU:N`` plane, the union of its ``Stream #`` kernel
  and copy events (both numbers), and the largest plane's as the call's.
- **idle waits**: the code's own waits (``block_until_ready``), annotated in the trace by
  `scanbench.probes.conversions` (``WAIT_EVENT``): ``wait_s`` is the union of their spans
  and ``wait_idle_s`` the part of it during which no device was busy. A wait that sleeps
  while the device computes costs nothing the device was not doing anyway; the time the
  device sat idle inside a wait (the wake-up, a wait on a value already computed) is
  what the waits cost, and what the decomposition calls *sync*.
- **busy by kernel** (``busy_by_op``): the seconds inside each kernel name (CPU thunks,
  GPU stream events), summed over threads and streams, the `BUSY_OPS` longest: which
  kernels take the device time, not only how many there are.
- **host conversions**: ``np.asarray(jax.Array)`` events, one per device array turned into
  host data (``np.array(x)``, ``float(x)``, ``x.item()``...). On CPU they are zero-copy and
  the transfer guard does not log them, so this is the only count of them there.

Kernels that run *inline* on a thread that dispatches (XLA:CPU runs an executable of
under 1000 flops on the calling thread) are kept apart (``inline_busy_s``): they are part
of what a dispatch costs, and the dispatch unit cost already contains them.

Busy time is measured under the profiler, which adds a cost to every recorded event; the
decomposition (`scanbench.decomposition`) takes that cost out of the busy time and of the
wall time (``busy_events`` and ``events`` x the measured cost per event) and uses the
busy *share* of the traced call.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from .conversions import WAIT_EVENT
from .trace import HOST_PLANE, PJIT, TraceEvent, is_kernel

HOST_CONVERSION = "np.asarray(jax.Array)"
# an executor running a program, and its wait for the program's asynchronous thunks (on a
# client thread: the program is executing on the intra-op pool, maybe between kernels)
THUNK_EXECUTOR = ("ThunkExecutor::Execute", "ThunkExecutor::Execute (wait for completion)")
GPU_PLANE_PREFIX = "/device:GPU:"
BUSY_OPS = 8  # kernels named in busy_by_op, the longest first


@dataclasses.dataclass(frozen=True)
class Spans:
    """Measured spans of one traced region (one or more calls), in seconds."""

    wall_s: float  # the traced region's wall time, measured around the calls
    device_busy_s: float  # an XLA program executing off the calling threads (largest GPU)
    kernel_busy_s: float  # of which, inside kernels
    inline_busy_s: float  # kernels run inline on a calling thread (part of its dispatch)
    busy_by_device: dict[str, float]
    events: int  # host-plane events recorded (each costs the profiler some time)
    busy_events: int  # of which, inside the device-busy time (CPU; 0 on GPU)
    host_conversions: int
    wait_s: float = 0.0  # inside the code's own waits (their union)
    wait_idle_s: float = 0.0  # of which, with no device busy
    # which kernels take the device time: seconds inside each kernel name (summed over
    # threads and streams), the `BUSY_OPS` largest
    busy_by_op: dict[str, float] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def union_ns(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length of the union of ``(start, end)`` intervals (overlaps counted once)."""
    total = 0.0
    current_start = current_end = None
    for start, end in sorted(intervals):
        if current_end is None or start > current_end:
            if current_end is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None:
        total += current_end - current_start
    return total


def measure_spans(events: Sequence[TraceEvent], wall_s: float) -> Spans:
    """Device-busy time and host conversions of a traced region (pure; see module doc)."""
    host = [event for event in events if event.plane == HOST_PLANE]
    calling = {event.line for event in host if PJIT.match(event.name)}
    kernels: list[tuple[float, float]] = []
    executors: list[tuple[float, float]] = []
    inline: list[tuple[float, float]] = []
    waits: list[tuple[float, float]] = []
    gpu: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
    by_op: collections.Counter[str] = collections.Counter()
    gpu_by_op: collections.Counter[str] = collections.Counter()
    conversions = busy_events = 0
    for event in host:
        span = (event.start_ns * 1e-9, (event.start_ns + event.duration_ns) * 1e-9)
        if event.name == HOST_CONVERSION:
            conversions += 1
        elif event.name == WAIT_EVENT:
            waits.append(span)
        elif event.line in calling:
            if is_kernel(event):
                inline.append(span)
        elif event.name in THUNK_EXECUTOR:
            executors.append(span)
            busy_events += 1
        elif "hlo_op" in event.stats:  # kernels, and loop containers (inside executors)
            busy_events += 1
            if is_kernel(event):
                kernels.append(span)
                by_op[event.name] += event.duration_ns * 1e-9
    for event in events:
        if event.plane.startswith(GPU_PLANE_PREFIX) and event.line.startswith("Stream #"):
            start = event.start_ns * 1e-9
            gpu[event.plane[len("/device:") :]].append((start, start + event.duration_ns * 1e-9))
            gpu_by_op[event.name] += event.duration_ns * 1e-9
    if gpu:
        by_device = {device: union_ns(spans) for device, spans in sorted(gpu.items())}
        busy = kernel_busy = max(by_device.values())
        busy_events = 0  # device timestamps: the host profiler's cost is not in them
        busy_spans = [span for spans in gpu.values() for span in spans]
        by_op = gpu_by_op
    else:
        busy, kernel_busy = union_ns(kernels + executors), union_ns(kernels)
        by_device = {"cpu": busy} if busy else {}
        busy_spans = kernels + executors
    waited = union_ns(waits)
    # the part of the waits with some device busy: |W| + |B| - |W u B|
    overlapped = waited + union_ns(busy_spans) - union_ns(waits + busy_spans)
    return Spans(
        wall_s=wall_s,
        device_busy_s=busy,
        kernel_busy_s=kernel_busy,
        inline_busy_s=union_ns(inline),
        busy_by_device=by_device,
        events=len(host),
        busy_events=busy_events,
        host_conversions=conversions,
        wait_s=waited,
        wait_idle_s=max(waited - overlapped, 0.0),
        busy_by_op=dict(by_op.most_common(BUSY_OPS)),
    )

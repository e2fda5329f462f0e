"""GPU trace counting (CUDA; written from XLA's CUPTI collector layout, GPU-only path).

The layout XLA's CUPTI collector writes into the XSpace:
- ``/device:GPU:N`` planes, one per GPU, whose lines named ``Stream #<id>(...)`` hold one
  event per kernel execution and per memory copy. Copies are named ``MemcpyH2D``,
  ``MemcpyD2H``, ``MemcpyD2D``, ``MemcpyP2P`` or ``MemcpyOther`` and carry a
  ``memcpy_details`` stat (``kind_src:... kind_dst:... size:<bytes> dest:... async:...``).
  Copies that XLA itself issues inside an executable carry an ``hlo_op`` stat and are
  reported apart from user transfers. Derived lines (``XLA Ops``, ``XLA Modules``,
  ``Steps``...) repeat the same kernels and are ignored;
- ``/host:CUPTI``: driver API calls, among them ``cuLaunchKernel``/``cuLaunchKernelEx``
  (one per kernel launched op by op) and ``cuGraphLaunch`` (one per CUDA graph, i.e. an
  XLA command buffer that replays many kernels with one launch).

While profiling, XLA runs command buffers op by op unless
``--xla_enable_command_buffers_during_profiling=true`` is in ``XLA_FLAGS``; the counts
record which mode they come from (``command_buffers_during_profiling``), and the runner
profiles GPU cells both ways.

Device memory (`device_peak`) is read from ``device.memory_stats()`` (``bytes_in_use``,
``peak_bytes_in_use``), the keys JAX documents for GPU; it is tested on synthetic stats.
"""

from __future__ import annotations

import collections
import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .peak import MeasuredPeak
from .trace import TraceEvent

DEVICE_PLANE = re.compile(r"^/device:GPU:(\d+)$")
CUPTI_PLANE = "/host:CUPTI"
MEMCPY = ("MemcpyH2D", "MemcpyD2H", "MemcpyD2D", "MemcpyP2P", "MemcpyOther")
NOT_KERNELS = ("Memset", "MemoryAlloc", "MemoryFree", "Synchronization", "Overhead")
_SIZE = re.compile(r"\bsize:(\d+)")
COMMAND_BUFFER_FLAG = "--xla_enable_command_buffers_during_profiling=true"


@dataclasses.dataclass(frozen=True)
class GpuCounts:
    kernels: int
    kernels_by_device: Mapping[str, int]
    kernels_by_name: Mapping[str, int]
    memcpy: Mapping[str, int]
    memcpy_bytes: Mapping[str, int]
    xla_internal_memcpy: int
    kernel_launch_calls: int
    graph_launches: int
    command_buffers_during_profiling: bool

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def memcpy_bytes(stats: Mapping[str, Any]) -> int:
    match = _SIZE.search(str(stats.get("memcpy_details", "")))
    return int(match.group(1)) if match else 0


def count_gpu_events(events: Iterable[TraceEvent], command_buffers: bool) -> GpuCounts:
    """Count kernels, copies and launches in a GPU trace (pure; see module doc)."""
    kernels_by_device: collections.Counter[str] = collections.Counter()
    kernels_by_name: collections.Counter[str] = collections.Counter()
    memcpy: collections.Counter[str] = collections.Counter()
    copied: collections.Counter[str] = collections.Counter()
    internal = launches = graphs = 0
    for event in events:
        if event.plane == CUPTI_PLANE:
            if event.name.startswith("cuLaunchKernel"):
                launches += 1
            elif event.name.startswith("cuGraphLaunch"):
                graphs += 1
            continue
        device = DEVICE_PLANE.match(event.plane)
        if not device or not event.line.startswith("Stream #"):
            continue
        if event.name in MEMCPY:
            if "hlo_op" in event.stats:
                internal += 1
                continue
            memcpy[event.name] += 1
            copied[event.name] += memcpy_bytes(event.stats)
        elif not event.name.startswith(NOT_KERNELS):
            kernels_by_device[f"GPU:{device.group(1)}"] += 1
            kernels_by_name[event.name] += 1
    return GpuCounts(
        kernels=sum(kernels_by_device.values()),
        kernels_by_device=dict(kernels_by_device),
        kernels_by_name=dict(kernels_by_name.most_common()),
        memcpy=dict(memcpy),
        memcpy_bytes=dict(copied),
        xla_internal_memcpy=internal,
        kernel_launch_calls=launches,
        graph_launches=graphs,
        command_buffers_during_profiling=command_buffers,
    )


def command_buffers_enabled(xla_flags: str) -> bool:
    return COMMAND_BUFFER_FLAG in xla_flags.split()


def with_command_buffers(environ: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``environ`` whose XLA_FLAGS keep command buffers on while profiling."""
    env = dict(environ)
    flags = env.get("XLA_FLAGS", "")
    if not command_buffers_enabled(flags):
        env["XLA_FLAGS"] = f"{flags} {COMMAND_BUFFER_FLAG}".strip()
    return env


def device_peak(
    call: Callable[[], Any], stats: Callable[[], Sequence[Mapping[str, int] | None]]
) -> tuple[Any, MeasuredPeak]:
    """Run ``call()`` and measure its peak device-memory growth, summed over the devices
    ``stats()`` reports (``memory_stats()`` of each; see the module doc)."""
    before = stats()
    if not before or any(not s or "peak_bytes_in_use" not in s for s in before):
        output = call()
        return output, MeasuredPeak(None, "device", note="the device reports no memory_stats")
    output = call()
    after = stats()
    growth, exact = 0, True
    for old, new in zip(before, after, strict=True):
        in_use = old.get("bytes_in_use", 0)
        if new["peak_bytes_in_use"] > old["peak_bytes_in_use"]:
            growth += new["peak_bytes_in_use"] - in_use
        else:  # the call stayed under an earlier peak: bounded by it, not measured
            growth += old["peak_bytes_in_use"] - in_use
            exact = False
    note = "" if exact else "at most: the call did not exceed an earlier peak (JAX cannot reset it)"
    return output, MeasuredPeak(growth, "device", exact=exact, note=note)

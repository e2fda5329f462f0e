"""The machine's memory levels and the copy bandwidth of each, so that a cell is compared
with the bound of the level its working set fits in.

A working set that fits in the last-level cache is not bounded by DRAM: at `smoke` the
TDMA inputs (~2 MB) live in L3, and a ratio to the DRAM copy bandwidth there means
something else than at `default` (80 MB). So the run measures, with the same copy the
DRAM bound uses (``np.copyto``; a copy of n bytes moves 2n, the STREAM convention):

- the cache levels the OS reports (``/sys/devices/system/cpu/cpu0/cache/index*``: data
  and unified caches, their sizes);
- the copy bandwidth at a working set inside each level from L2 on (source and
  destination together half the level: it holds them with room to spare; an L1 copy is
  too short for a Python-driven measurement: the call costs more than the copy) and
  beyond the last one (DRAM: at least 4x the last level, 256 MiB at least),
- with one thread and with every core this process may use (each thread copying its
  own share, NumPy releases the GIL): a sharded or parallel backend is compared with
  the all-cores figure.

`scanbench.bounds.bound_for` picks the level a working set fits in. On a GPU the device's
L2 is not read from the OS; the HBM copy of a device array would be the bound there,
measured by the GPU run itself (not done on CPU).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

SYSFS = Path("/sys/devices/system/cpu/cpu0/cache")
DRAM = "DRAM"
MIN_DRAM_BYTES = 256 * 2**20
TIMED_S = 0.02  # each measurement copies until it has taken about this long


@dataclasses.dataclass(frozen=True)
class Level:
    """A memory level and the copy bandwidth measured at a working set inside it."""

    name: str  # "L1d", "L2", "L3", "DRAM"
    size_bytes: int | None  # None: DRAM
    working_set_bytes: int  # source + destination of the measured copy
    bytes_per_s: float  # one thread
    bytes_per_s_all: float  # every usable core, each copying its own share
    threads: int

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def cache_sizes(root: Path = SYSFS) -> list[tuple[str, int]]:
    """(name, bytes) of the data and unified caches, smallest first (``[]`` where the OS
    does not say)."""
    found = {}
    for index in sorted(root.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = _bytes((index / "size").read_text().strip())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified"):
            found[f"L{level}d" if kind == "Data" else f"L{level}"] = size
    return sorted(found.items(), key=lambda item: item[1])


def _bytes(text: str) -> int:
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    if text and text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


def _copy_rate(nbytes: int, threads: int) -> float:
    """Bytes per second of ``threads`` concurrent copies of ``nbytes`` each (a copy of n
    bytes moves 2n), repeated until each measurement takes about `TIMED_S`; the best of
    five."""
    sources = [np.ones(max(nbytes // 8, 1)) for _ in range(threads)]
    targets = [np.empty_like(s) for s in sources]
    for source, target in zip(sources, targets, strict=True):
        np.copyto(target, source)  # first touch: page faults are not timed
    start = time.perf_counter()
    np.copyto(targets[0], sources[0])
    once = max(time.perf_counter() - start, 1e-7)
    repeats = max(1, int(TIMED_S / once))

    def copy(index: int) -> None:
        for _ in range(repeats):
            np.copyto(targets[index], sources[index])

    best = float("inf")
    for _ in range(5):
        workers = [threading.Thread(target=copy, args=(i,)) for i in range(threads)]
        start = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        best = min(best, time.perf_counter() - start)
    return 2 * sources[0].nbytes * repeats * threads / best


def usable_threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def measure_levels(caches: Sequence[tuple[str, int]] | None = None) -> list[Level]:
    """The copy bandwidth inside each cache level and beyond the last (see the module
    doc), one thread and every usable core."""
    caches = cache_sizes() if caches is None else list(caches)
    threads = usable_threads()
    levels = []
    for name, size in caches:
        if name.startswith("L1"):
            continue  # see the module doc
        copied = size // 4  # source + destination: half the level, shared by the threads
        one, every = _copy_rate(copied, 1), _copy_rate(copied // threads, threads)
        levels.append(Level(name, size, 2 * copied, one, every, threads))
    largest = caches[-1][1] if caches else 0
    copied = max(2 * largest, MIN_DRAM_BYTES // 2)  # source + destination: 4x the last level
    one, every = _copy_rate(copied, 1), _copy_rate(copied // threads, threads)
    levels.append(Level(DRAM, None, 2 * copied, one, every, threads))
    return levels


EVICT_DEFAULT_BYTES = 64 * 2**20  # where the OS names no cache: larger than most LLCs


@functools.cache
def evictor() -> Callable[[], None]:
    """A function that evicts this CPU's caches (nvbench's "cold" samples, triton's
    ``do_bench``): it reads and writes a buffer of twice the last-level cache, allocated
    once per process (a fresh buffer per sample would time page faults instead), so that
    the next call finds none of its data in a cache. It runs outside the timed region.
    On a GPU the device's L2 is evicted too (`_device_evictor`)."""
    sizes = cache_sizes()
    nbytes = 2 * sizes[-1][1] if sizes else EVICT_DEFAULT_BYTES
    buffer = np.zeros(nbytes // 8)
    device = _device_evictor()

    def evict() -> None:
        np.add(buffer, 1.0, out=buffer)
        if device is not None:
            device()

    return evict


GPU_L2_EVICT_BYTES = 256 * 2**20  # above the L2 of current NVIDIA GPUs (H100: 50 MB)


def _device_evictor() -> Callable[[], None] | None:
    """On a GPU, a jitted write of a device buffer larger than its L2 (JAX does not
    report the L2's size: `GPU_L2_EVICT_BYTES` covers current GPUs), waited for; None
    on CPU, where the host buffer already evicts what the device (the CPU) caches."""
    import jax

    if jax.devices()[0].platform != "gpu":
        return None
    buffer = jax.numpy.zeros(GPU_L2_EVICT_BYTES // 4, jax.numpy.float32)
    touch = jax.jit(lambda x: x + 1.0)

    def evict() -> None:
        jax.block_until_ready(touch(buffer))

    return evict

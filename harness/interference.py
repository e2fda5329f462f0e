"""Was the machine busy while a cell ran? Load, CPU steal and a calibration probe.

On a shared machine another process can slow a cell down several-fold (a loaded run
once showed a 0.3 ms Numba kernel at 8 ms). Nothing in the samples says so, so the runner
records, per cell:

- a fixed *calibration probe* (a small pure-Python workload, the least CPU time of a few
  repeats) timed in the parent just before and just after the cell: a core that got
  slower or faster in between shows as *drift*. CPU time, not wall time, and the least of
  the repeats, not the median: wall-time probes taken at the moment a worker process has
  just exited (the kernel reclaiming its memory) or starts were preempted for a moment
  and flagged 5 of 29 cells of a quiet smoke run (0.48x-1.72x "drift"); a busy machine is
  what the runnable-task samples below are for;
- the *runnable tasks* on the machine while the worker runs (``procs_running`` of
  ``/proc/stat``, sampled every `SAMPLE_EVERY_S`; the sampler itself is not counted), and
  how many of them were not the cell's own threads;
- *CPU steal* (time a hypervisor gave to other guests) over the cell, from ``/proc/stat``;
- the 1-minute load average before and after (shown, not decided on: it includes the
  cell's own work and lags by a minute).

A cell is *disturbed* when any threshold below is crossed; the reports mark it and the
gate refuses to decide an invariant on it. On a system without ``/proc`` only the probe
is measured. A cell that keeps every core busy itself (XLA's thread pool, a sharded
backend's device per core) is not disturbed: more tasks than cores were runnable, but
they were its own; the machine was busy when more tasks than cores were runnable *and*
on average at least `OTHERS` of them were not the cell's.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

# after/before probe time beyond this (or below its inverse): disturbed. Two probes a
# moment apart on a quiet 2-core VM differ by more than 1.25x in ~8% of pairs, by more
# than 1.5x in ~2%; with two busy processes competing, by ~1.65x in half of them.
PROBE_DRIFT = 1.5
STEAL_FRACTION = 0.05  # more than 5% of the CPU time stolen by the hypervisor: disturbed
OTHERS = 0.5  # runnable tasks not the cell's, on average: half a core's worth
SAMPLE_EVERY_S = 0.2
PROBE_REPEATS = 7


def _probe_work() -> int:
    """About 4-7 ms of interpreter work (a fixed amount): long enough to span several
    scheduler time slices, so a competing process shows."""
    total = 0
    for i in range(100_000):
        total += i * i
    return total


def calibration_probe(repeats: int = PROBE_REPEATS) -> float:
    """The least thread CPU time, in seconds, of ``repeats`` runs of the fixed workload."""
    times = []
    for _ in range(repeats):
        start = time.thread_time()
        _probe_work()
        times.append(time.thread_time() - start)
    return min(times)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def cpu_times() -> tuple[int, int] | None:
    """(total, steal) jiffies of all CPUs from /proc/stat; None without /proc."""
    text = _read("/proc/stat")
    if text is None:
        return None
    fields = [int(v) for v in text.splitlines()[0].split()[1:]]
    steal = fields[7] if len(fields) > 7 else 0
    return sum(fields[:8]), steal


def procs_running() -> int | None:
    text = _read("/proc/stat")
    if text is None:
        return None
    for line in text.splitlines():
        if line.startswith("procs_running"):
            return int(line.split()[1])
    return None


def thread_states(pid: int) -> list[str] | None:
    """The state letter of each thread of ``pid`` (``/proc/<pid>/task/*/stat``: R
    running or runnable, S sleeping, T stopped, ...), None when it is gone or there is no
    ``/proc``."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    stats = (_read(f"/proc/{pid}/task/{task}/stat") for task in tasks)
    return [stat.rsplit(")", 1)[-1].split()[0] for stat in stats if stat]


def running_threads(pid: int) -> int:
    """Threads of process ``pid`` in state R (running or runnable)."""
    return sum(state == "R" for state in thread_states(pid) or ())


def load_average() -> float | None:
    try:
        return float(os.getloadavg()[0])
    except OSError:
        return None


@dataclasses.dataclass
class LoadSamples:
    """Runnable tasks sampled while a worker ran: all of them, and the others."""

    runnable: list[int] = dataclasses.field(default_factory=list)
    others: list[int] = dataclasses.field(default_factory=list)


@contextmanager
def sample_load(pid: int, samples: LoadSamples) -> Iterator[LoadSamples]:
    """Sample runnable tasks into ``samples`` every `SAMPLE_EVERY_S`, in a thread, while
    the block runs; the running threads of process ``pid`` (the cell's worker) are told
    apart from the others."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(SAMPLE_EVERY_S):
            running = procs_running()
            if running is None:
                return
            running -= 1  # this sampler thread, running while it reads
            own = running_threads(pid)
            samples.runnable.append(max(running, 0))
            samples.others.append(max(running - own, 0))

    thread = threading.Thread(target=loop, name="scanbench-load-sampler", daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        stop.set()
        thread.join()


@dataclasses.dataclass(frozen=True)
class Interference:
    """What the machine was doing around and during one cell, and the verdict."""

    probe_before_s: float | None = None
    probe_after_s: float | None = None
    runnable_mean: float | None = None
    runnable_max: int | None = None
    others_mean: float | None = None
    steal_fraction: float | None = None
    load_before: float | None = None
    load_after: float | None = None
    cores: int | None = None
    disturbed: bool = False
    reasons: tuple[str, ...] = ()

    @property
    def drift(self) -> float | None:
        if not self.probe_before_s or not self.probe_after_s:
            return None
        return self.probe_after_s / self.probe_before_s

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "reasons": list(self.reasons), "drift": self.drift}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Interference:
        names = {field.name for field in dataclasses.fields(cls)}
        fields = {key: value for key, value in data.items() if key in names}
        fields["reasons"] = tuple(fields.get("reasons", ()))
        return cls(**fields)


def assess(
    probe_before_s: float | None,
    probe_after_s: float | None,
    samples: LoadSamples,
    steal: tuple[tuple[int, int] | None, tuple[int, int] | None],
    loads: tuple[float | None, float | None],
    cores: int,
) -> Interference:
    """The verdict on measured values (pure): disturbed when the probe drifted beyond
    `PROBE_DRIFT`, more tasks than cores were runnable on average with at least `OTHERS`
    of them not the cell's, or more than `STEAL_FRACTION` of the CPU time was stolen."""
    reasons = []
    steal_fraction = None
    before, after = steal
    if before and after and after[0] > before[0]:
        steal_fraction = (after[1] - before[1]) / (after[0] - before[0])
        if steal_fraction > STEAL_FRACTION:
            reasons.append(f"{steal_fraction:.0%} of CPU time stolen by the hypervisor")
    runnable_mean = float(np.mean(samples.runnable)) if samples.runnable else None
    others_mean = float(np.mean(samples.others)) if samples.others else None
    if runnable_mean is not None and runnable_mean > cores and (others_mean or 0) >= OTHERS:
        reasons.append(
            f"{runnable_mean:.1f} runnable tasks on average for {cores} cores "
            f"({others_mean:.1f} of them not this cell's)"
        )
    result = Interference(
        probe_before_s=probe_before_s,
        probe_after_s=probe_after_s,
        runnable_mean=runnable_mean,
        runnable_max=max(samples.runnable) if samples.runnable else None,
        others_mean=others_mean,
        steal_fraction=steal_fraction,
        load_before=loads[0],
        load_after=loads[1],
        cores=cores,
    )
    drift = result.drift
    if drift is not None and not 1 / PROBE_DRIFT <= drift <= PROBE_DRIFT:
        reasons.append(
            f"the calibration probe took {drift:.2f}x as long after the cell as before "
            f"(threshold {PROBE_DRIFT:g}x)"
        )
    return dataclasses.replace(result, disturbed=bool(reasons), reasons=tuple(reasons))

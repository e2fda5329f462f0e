"""What a cell's timed calls used of the machine: cores, and fresh memory pages.

Over the timed calls of a cell (not the warm-up, not the untimed hooks before each call),
the process's own accounting gives the numbers the diagnosis compares backends by:

- **cores** = CPU time of every thread (user + system, ``getrusage``) / wall time: the
  average number of cores the calls kept busy. A backend registered as serial that runs
  Numba ``prange`` on two threads shows 2; a JAX program whose work hops between the
  pool's threads but runs one at a time shows 1 (a count of threads that worked would say
  2 or 3). Threads that spin while they wait for work count as working: they take a core
  from anyone else just the same. It is a measurement of the cell, never the backend's
  declaration, and every per-core comparison in the reports uses it.
- **ready**: the time the threads spent ready to run but waiting for a CPU, summed over
  threads (``/proc/self/task/*/schedstat``; None where the kernel keeps none). On a
  machine shared with other programs every thread gets less CPU and *cores* falls below
  what the backend uses alone; a ready time above `CONTENDED` of the wall time marks the
  figure as measured on a busy machine (``contended``) when the machine says so too:
  ready time alone also counts the wake-up latency of the cell's own pool threads (a
  program that hands work between threads thousands of times per call gathers 10-20% of
  its wall time that way on an idle machine), so the CPU time the whole machine spent
  over the same window (``/proc/stat``: user, system, interrupts and steal of every CPU)
  less this process's own (``others_s``) must be above `CONTENDED` of a core too. A
  window shorter than `MACHINE_WINDOW_S` (the kernel counts in ticks of 10 ms) keeps the
  ready time alone. Ready time is not added to the cores: work that hops between
  threads makes several threads wait at once although one would run at a time.
- **system time**: of that CPU time, the part spent in the kernel (``ru_stime``): page
  faults and the zeroing of fresh pages, system calls. A fault is handled in the kernel,
  so the faults' time is at most it: the ceiling beside the fault price's floor.
- **minor page faults** per call (``getrusage``): pages the calls touched for the first
  time (a fresh ``mmap`` of an output buffer, a carry zero-filled on every call). glibc
  maps a buffer above its largest mmap threshold (32 MiB) afresh on each allocation
  unless the heap's free top already holds it, so such a call usually pays the kernel's
  page faults and zeroing on every call;
  `scanbench.probes.rates` prices one fault.

The CPU time and faults are read right before each timed call (after the untimed hooks
that run before it: a stateful function's setup, the eviction of the caches for a cold
sample) and right after it (``getrusage``: about a microsecond, outside the timed
region), so the loop's own bookkeeping is not in them. They cover samples 2..n (the
first sample's own allocations settle the heap), or the one sample when there is one.
The ready time is read at the start and the end of that window. On a GPU, cores are the
host's: the device's work is not in them.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TASKS = Path("/proc/self/task")
SCHEDSTAT = "schedstat"
PROC_STAT = Path("/proc/stat")
CONTENDED = 0.10  # ready-to-run time / wall time from which cores are marked contended
MACHINE_WINDOW_S = 0.5  # from this window on, the machine's CPU time clears or confirms it


@dataclasses.dataclass(frozen=True)
class Reading:
    """Wall time, CPU time of every thread and minor page faults (of a call, or summed)."""

    wall_s: float
    run_s: float
    minor_faults: int
    system_s: float = 0.0  # of run_s, the CPU time spent in the kernel

    def __add__(self, other: Reading) -> Reading:
        return Reading(
            self.wall_s + other.wall_s,
            self.run_s + other.run_s,
            self.minor_faults + other.minor_faults,
            self.system_s + other.system_s,
        )


ZERO = Reading(0.0, 0.0, 0)


def ready_s(root: Path = TASKS) -> float | None:
    """Seconds this process's threads waited on a run queue, ready to run, summed over
    threads (``schedstat``, ns); None where the kernel does not keep it."""
    ready = 0
    try:
        tasks = list(root.iterdir())
    except OSError:
        return None
    found = False
    for task in tasks:
        try:
            ready += int((task / SCHEDSTAT).read_text().split()[1])
            found = True
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended between the listing and the read
    return ready * 1e-9 if found else None


def machine_busy_s(path: Path = PROC_STAT) -> float | None:
    """CPU seconds every CPU of the machine spent busy since boot (user, nice, system,
    irq, softirq, steal of ``/proc/stat``'s first line); None where it cannot be read."""
    try:
        fields = path.read_text().split("\n", 1)[0].split()
        ticks = os.sysconf("SC_CLK_TCK")
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[1:9])
    except (OSError, ValueError):
        return None
    return (user + nice + system + irq + softirq + steal) / ticks


def _process_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclasses.dataclass(frozen=True)
class Usage:
    """What ``calls`` timed calls used (stored as ``record.sampling["usage"]``)."""

    calls: int
    wall_s: float
    run_s: float  # CPU time of every thread
    ready_s: float | None  # the threads' time ready to run, waiting for a CPU (None: not kept)
    minor_faults: int
    # CPU seconds other programs took over the window the ready time covers, and its
    # length (None: not read, or a window too short for the kernel's ticks)
    others_s: float | None = None
    window_s: float | None = None
    # of run_s, the CPU seconds spent in the kernel (page faults and their zeroing,
    # system calls); None: not read
    system_s: float | None = None

    @property
    def cores(self) -> float | None:
        """Cores the calls kept busy: CPU time / wall time; None without a wall time."""
        return self.run_s / self.wall_s if self.wall_s > 0 else None

    @property
    def contended(self) -> bool | None:
        """Whether the threads waited for a CPU for over `CONTENDED` of the wall time
        while other programs took over `CONTENDED` of a core (see the module doc; None:
        not known)."""
        if self.ready_s is None or self.wall_s <= 0:
            return None
        if self.ready_s / self.wall_s <= CONTENDED:
            return False
        if self.others_s is None or not self.window_s:
            return True  # the ready time alone
        return self.others_s / self.window_s > CONTENDED

    @property
    def faults_per_call(self) -> float | None:
        return self.minor_faults / self.calls if self.calls else None

    @property
    def system_per_call(self) -> float | None:
        """CPU seconds in the kernel per call (every thread's), None: not read."""
        return self.system_s / self.calls if self.calls and self.system_s is not None else None

    def to_json(self) -> dict[str, Any]:
        return {
            **dataclasses.asdict(self),
            "cores": self.cores,
            "faults_per_call": self.faults_per_call,
            "system_per_call": self.system_per_call,
            "contended": self.contended,
        }


def _rusage() -> tuple[float, float, int, float]:
    """(wall, CPU time of every thread, minor faults, of that CPU time the kernel's)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return (
        time.perf_counter(),
        usage.ru_utime + usage.ru_stime,
        usage.ru_minflt,
        usage.ru_stime,
    )


class Meter:
    """Readings around each timed call of a sampling loop (see the module doc): `before`
    wraps what runs before each call (the loop's ``before``), `sampled` is its
    after-sample callback, `usage` is read once it returned."""

    def __init__(
        self,
        rusage: Callable[[], tuple[float, ...]] = _rusage,
        ready: Callable[[], float | None] = ready_s,
        machine: Callable[[], tuple[float, float | None, float]] | None = None,
    ) -> None:
        self.rusage = rusage
        self.ready = ready
        # (wall, the machine's busy CPU seconds, this process's): read with the ready time
        self.machine = machine if machine is not None else _machine_reading
        self.machine_from: tuple[float, float | None, float] | None = None
        self.started: tuple[float, ...] | None = None  # before the current call
        self.system_read = True  # the readings carry the kernel's CPU time
        self.first = ZERO  # the first sample
        self.window = ZERO  # samples 2..n
        self.ready_from: float | None = None  # the threads' ready time at sample 1

    def before(self, hook: Callable[[], Any] | None) -> Callable[[], None]:
        """What the loop runs before each call: ``hook`` (untimed), then the reading."""

        def measured() -> None:
            if hook is not None:
                hook()
            self.started = self.rusage()

        return measured

    def sampled(self, count: int) -> None:
        """After sample ``count``: the call's CPU time and faults are added up."""
        end = self.rusage()
        if self.started is None:
            return
        self.system_read = self.system_read and len(end) > 3
        spent = Reading(
            end[0] - self.started[0],
            end[1] - self.started[1],
            int(end[2] - self.started[2]),
            end[3] - self.started[3] if self.system_read else 0.0,
        )
        self.started = None
        if count == 1:
            self.first = spent
            self.ready_from = self.ready()
            self.machine_from = self.machine()
        else:
            self.window = self.window + spent

    def usage(self, samples: int) -> Usage | None:
        """The usage of samples 2..n, or of the one sample."""
        if samples >= 2:
            spent, calls = self.window, samples - 1
            now = self.ready()
            ready = None if now is None or self.ready_from is None else now - self.ready_from
            others, window = self._others()
        elif samples == 1:
            spent, calls, ready = self.first, 1, None
            others = window = None
        else:
            return None
        return Usage(
            calls,
            max(spent.wall_s, 0.0),
            max(spent.run_s, 0.0),
            None if ready is None else max(ready, 0.0),
            max(spent.minor_faults, 0),
            others,
            window,
            max(spent.system_s, 0.0) if self.system_read else None,
        )

    def _others(self) -> tuple[float | None, float | None]:
        """Other programs' CPU seconds over the window, and its length (module doc)."""
        start, end = self.machine_from, self.machine()
        if start is None or start[1] is None or end[1] is None:
            return None, None
        window = end[0] - start[0]
        if window < MACHINE_WINDOW_S:
            return None, None
        return max((end[1] - start[1]) - (end[2] - start[2]), 0.0), window


def _machine_reading() -> tuple[float, float | None, float]:
    return time.perf_counter(), machine_busy_s(), _process_cpu_s()

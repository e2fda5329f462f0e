"""Was the machine busy while a cell ran? Load, CPU steal and a calibration probe.

On a shared machine another process can slow a cell down several-fold (a loaded run
once showed a 0.3 ms Numba kernel at 8 ms). Nothing in the samples says so, so the runner
records, per cell:

- a fixed *calibration probe* (a small pure-Python workload, the least CPU time of a few
  repeats) timed in the parent just before the cell's timed samples and just after them
  (before its counting stages: what the machine did then judges no sample): a core that
  got slower or faster in between shows as *drift*. CPU time, not wall time, and the least of
  the repeats, not the median: wall-time probes taken at the moment a worker process has
  just exited (the kernel reclaiming its memory) or starts were preempted for a moment
  and flagged 5 of 29 cells of a quiet smoke run (0.48x-1.72x "drift"); a busy machine is
  what the runnable-task samples below are for;
- the *runnable tasks* on the machine while the worker is timed (``procs_running`` of
  ``/proc/stat``, sampled as a quiet stage begins, then every `FAST_EVERY_S` for
  `FAST_SAMPLES` samples and every `SAMPLE_EVERY_S` after; the sampler itself is not
  counted) and the *others*: the tasks that are not the cell's threads, found by a scan of
  ``/proc/*/task`` and named (a kernel worker thread or another program names itself)
  whenever ``procs_running`` exceeds the cell's running threads. Counting that excess
  alone overcounted: a worker's threads hand work to each other between the two reads (a
  scanned TDMA cell showed one "other" task in all 9 samples, the scan found none). A
  mean of runnable tasks is judged over at least `MIN_LOAD_SAMPLES` samples; one or two
  samples of a stage of a few tenths of a second catching a kernel thread at work
  (``kworker``, ``rcu_preempt``, ``kdamond``, a hypervisor agent) flagged quiet cells and
  once failed a CI test;
- *CPU steal* (time a hypervisor gave to other guests) over the cell, from ``/proc/stat``;
- the 1-minute load average before and after (shown, not decided on: it includes the
  cell's own work and lags by a minute).

A cell is also disturbed when its samples, in the order taken, had a *slow spell*
(`scanbench.spells`: a run of samples at a level well above the others'), the machine
slowing down in the middle of the cell while the probe read the same before and after.

A cell is *disturbed* when any threshold below is crossed or a slow spell is found; its
worker samples it again, then the run measures it again (`scanbench.execution.remeasure`),
unless other programs are still busy right after its samples (`still_busy`: sampled
again, it would be disturbed the same way; a parallel test run disturbed nearly every
cell so), and the reports mark a cell that stays disturbed. On a system without
``/proc`` only the probe is measured. A cell that keeps every core busy itself (XLA's
thread pool, a sharded backend's device per core) is not disturbed: more tasks than
cores were runnable, but they were its own; the machine was busy when more tasks than
cores were runnable *and* on average at least `OTHERS` of them were not the cell's.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..spells import SlowSpell, find_spell

# after/before probe time beyond this (or below its inverse): disturbed. Two probes a
# moment apart on a quiet 2-core VM differ by more than 1.25x in ~8% of pairs, by more
# than 1.5x in ~2%; with two busy processes competing, by ~1.65x in half of them.
PROBE_DRIFT = 1.5
STEAL_FRACTION = 0.05  # more than 5% of the CPU time stolen by the hypervisor: disturbed
OTHERS = 0.5  # runnable tasks not the cell's, on average: half a core's worth
# A sample costs ~0.1-0.5 ms of the parent's time (the worker's threads), ~2 ms more when
# it scans /proc for the others: fast at first, so that short stages get enough samples.
FAST_EVERY_S = 0.05
FAST_SAMPLES = 20
SAMPLE_EVERY_S = 0.2
MIN_LOAD_SAMPLES = 4  # fewer samples than this (a stage under ~0.15 s): load not judged
PERSIST_SAMPLES = 10  # the check that other programs still run, before measuring again
NAMED_OTHERS = 3  # the reason names this many of the other runnable tasks, most seen first
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


def _task_state(path: str) -> tuple[str, str] | None:
    """(name, state letter) from a ``/proc/.../stat`` file; None when it is gone."""
    stat = _read(path)
    if not stat:
        return None
    head, _, tail = stat.rpartition(")")
    return head.partition("(")[2], tail.split()[0]


def thread_states(pid: int) -> list[str] | None:
    """The state letter of each thread of ``pid`` (``/proc/<pid>/task/*/stat``: R
    running or runnable, S sleeping, T stopped, ...), None when it is gone or there is no
    ``/proc``."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    states = (_task_state(f"/proc/{pid}/task/{task}/stat") for task in tasks)
    return [state[1] for state in states if state is not None]


def running_threads(pid: int) -> int:
    """Threads of process ``pid`` in state R (running or runnable)."""
    return sum(state == "R" for state in thread_states(pid) or ())


def _pids() -> list[int]:
    try:
        return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return []


def _runnable_in(pids: list[int], exclude_tid: int) -> list[tuple[str, int]]:
    """(name, pid) of every task of processes ``pids`` in state R, except the task
    ``exclude_tid`` (the caller)."""
    found = []
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            if int(task) == exclude_tid:
                continue
            state = _task_state(f"/proc/{pid}/task/{task}/stat")
            if state is not None and state[1] == "R":
                found.append((state[0], pid))
    return found


def runnable_tasks(exclude_pid: int, exclude_tid: int) -> list[tuple[str, int]]:
    """(name, pid) of every task in state R on the machine, except the threads of process
    ``exclude_pid`` and the task ``exclude_tid`` (the caller): ~1.5 ms for ~80 tasks."""
    return _runnable_in([pid for pid in _pids() if pid != exclude_pid], exclude_tid)


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process (``/proc/<pid>/stat``)."""
    parents = {}
    for pid in _pids():
        stat = _read(f"/proc/{pid}/stat")
        if stat:
            parents[pid] = int(stat.rpartition(")")[2].split()[1])
    return parents


def _tree(root: int, parents: dict[int, int]) -> set[int]:
    """``root`` and every process descended from it."""
    children = collections.defaultdict(list)
    for pid, parent in parents.items():
        children[parent].append(pid)
    tree, stack = set(), [root]
    while stack:
        pid = stack.pop()
        if pid not in tree:
            tree.add(pid)
            stack.extend(children[pid])
    return tree


def foreign_runnable(root: int, exclude_tid: int) -> list[tuple[str, int]]:
    """(name, pid) of every task in state R that is not of process ``root`` or of one of
    its descendants (a run's own workers), except the task ``exclude_tid`` (the caller)."""
    parents = _parents()
    return _runnable_in(sorted(set(parents) - _tree(root, parents)), exclude_tid)


def busy_machine(interference: Interference) -> bool:
    """Disturbed by other programs: more tasks than cores were runnable and at least
    `OTHERS` of them, on average, were not the cell's (the rule of `assess`)."""
    return (
        interference.load_samples >= MIN_LOAD_SAMPLES
        and interference.cores is not None
        and (interference.runnable_mean or 0.0) > interference.cores
        and (interference.others_mean or 0.0) >= OTHERS
    )


def still_busy(
    interference: Interference,
    root: int | None = None,
    samples: int = PERSIST_SAMPLES,
    every_s: float = FAST_EVERY_S,
) -> str | None:
    """Why measuring a cell again now would be disturbed the same way, or None: the cell
    was disturbed by other programs (`busy_machine`) and, sampled ``samples`` times every
    ``every_s`` right after it, tasks that are not of this run (process ``root``, by
    default this one, and its workers) are still runnable, `OTHERS` or more on average.
    A slow spell, steal or drift alone is not judged here: those pass."""
    if not busy_machine(interference) or procs_running() is None:
        return None
    root = os.getpid() if root is None else root
    me = threading.get_native_id()
    counts, seen = [], collections.Counter()
    for index in range(samples):
        if index:
            time.sleep(every_s)
        others = foreign_runnable(root, me)
        counts.append(len(others))
        seen.update(set(others))
    mean = float(np.mean(counts))
    if mean < OTHERS:
        return None
    named = tuple(
        OtherTask(name, pid, count)
        for (name, pid), count in sorted(seen.items(), key=lambda item: (-item[1], item[0]))
    )
    return (
        f"not measured again: the machine was still busy after it ({mean:.1f} runnable "
        f"tasks not this run's on average{_named(named, samples)})"
    )


def load_average() -> float | None:
    try:
        return float(os.getloadavg()[0])
    except OSError:
        return None


@dataclasses.dataclass
class LoadSamples:
    """Runnable tasks sampled while a worker ran: all of them, the others, and the others
    by (name, pid): in how many samples each was seen runnable."""

    runnable: list[int] = dataclasses.field(default_factory=list)
    others: list[int] = dataclasses.field(default_factory=list)
    seen: collections.Counter[tuple[str, int]] = dataclasses.field(
        default_factory=collections.Counter
    )


@contextmanager
def sample_load(pid: int, samples: LoadSamples) -> Iterator[LoadSamples]:
    """Sample runnable tasks into ``samples`` in a thread while the block runs: as it
    begins, every `FAST_EVERY_S` for `FAST_SAMPLES` samples, then every `SAMPLE_EVERY_S`.
    The running threads of process ``pid`` (the cell's worker) are told apart from the
    others, which are found by a scan and named."""
    stop = threading.Event()

    def loop() -> None:
        me = threading.get_native_id()
        for taken in itertools.count(1):
            running = procs_running()
            if running is None:
                return
            running -= 1  # this sampler thread, running while it reads
            others = []
            if running > running_threads(pid):
                others = runnable_tasks(pid, me)
            samples.runnable.append(max(running, 0))
            samples.others.append(len(others))
            samples.seen.update(set(others))
            if stop.wait(FAST_EVERY_S if taken < FAST_SAMPLES else SAMPLE_EVERY_S):
                return

    thread = threading.Thread(target=loop, name="scanbench-load-sampler", daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        stop.set()
        thread.join()


@dataclasses.dataclass(frozen=True)
class OtherTask:
    """A runnable task that was not the cell's: its name, its process id, and in how many
    load samples it was seen runnable."""

    name: str
    pid: int
    samples: int


@dataclasses.dataclass(frozen=True)
class SetAside:
    """An earlier measurement of a cell, set aside because it was disturbed (the run
    measured the cell again): how it ended, what disturbed it, and its samples."""

    status: str
    error: str | None = None
    interference: Interference | None = None
    samples_s: tuple[float, ...] = ()
    median_s: float | None = None
    wall_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            **dataclasses.asdict(self),
            "interference": None if self.interference is None else self.interference.to_json(),
            "samples_s": list(self.samples_s),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SetAside:
        names = {field.name for field in dataclasses.fields(cls)}
        fields = {key: value for key, value in data.items() if key in names}
        if fields.get("interference") is not None:
            fields["interference"] = Interference.from_json(fields["interference"])
        fields["samples_s"] = tuple(fields.get("samples_s", ()))
        return cls(**fields)


@dataclasses.dataclass(frozen=True)
class Interference:
    """What the machine was doing around and during one cell, whether its samples had a
    slow spell, the verdict, and the measurements of the cell set aside before this one."""

    probe_before_s: float | None = None
    probe_after_s: float | None = None
    runnable_mean: float | None = None
    runnable_max: int | None = None
    others_mean: float | None = None
    load_samples: int = 0
    others_seen: tuple[OtherTask, ...] = ()
    steal_fraction: float | None = None
    load_before: float | None = None
    load_after: float | None = None
    cores: int | None = None
    slow_spell: SlowSpell | None = None
    disturbed: bool = False
    reasons: tuple[str, ...] = ()
    set_aside: tuple[SetAside, ...] = ()

    @property
    def drift(self) -> float | None:
        if not self.probe_before_s or not self.probe_after_s:
            return None
        return self.probe_after_s / self.probe_before_s

    def to_json(self) -> dict[str, Any]:
        return {
            **dataclasses.asdict(self),
            "reasons": list(self.reasons),
            "others_seen": [dataclasses.asdict(task) for task in self.others_seen],
            "slow_spell": None if self.slow_spell is None else self.slow_spell.to_json(),
            "set_aside": [attempt.to_json() for attempt in self.set_aside],
            "drift": self.drift,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Interference:
        names = {field.name for field in dataclasses.fields(cls)}
        fields = {key: value for key, value in data.items() if key in names}
        fields["reasons"] = tuple(fields.get("reasons", ()))
        fields["others_seen"] = tuple(OtherTask(**task) for task in fields.get("others_seen", ()))
        if fields.get("slow_spell") is not None:
            fields["slow_spell"] = SlowSpell.from_json(fields["slow_spell"])
        fields["set_aside"] = tuple(SetAside.from_json(a) for a in fields.get("set_aside", ()))
        return cls(**fields)


def with_slow_spell(
    interference: Interference, samples: tuple[float, ...], seed: int
) -> Interference:
    """The verdict with the slow-spell test of ``samples`` (in the order taken; the
    permutations drawn from ``seed``, `scanbench.spells.find_spell`) added: a spell makes
    the cell disturbed, its extent given among the reasons."""
    spell = find_spell(samples, seed)
    if spell is None:
        return interference
    return dataclasses.replace(
        interference,
        slow_spell=spell,
        disturbed=True,
        reasons=(*interference.reasons, spell.describe()),
    )


def _named(seen: tuple[OtherTask, ...], samples: int) -> str:
    """``: kworker/0:1 (pid 17) in 3 of 8 samples, ...`` for the tasks seen most, or
    nothing."""
    if not seen:
        return ""
    named = ", ".join(
        f"{task.name} (pid {task.pid}) in {task.samples} of {samples} samples"
        for task in seen[:NAMED_OTHERS]
    )
    more = len(seen) - NAMED_OTHERS
    return f": {named}" + (f" and {more} more" if more > 0 else "")


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
    of them not the cell's (judged over at least `MIN_LOAD_SAMPLES` samples), or more
    than `STEAL_FRACTION` of the CPU time was stolen."""
    reasons = []
    steal_fraction = None
    before, after = steal
    if before and after and after[0] > before[0]:
        steal_fraction = (after[1] - before[1]) / (after[0] - before[0])
        if steal_fraction > STEAL_FRACTION:
            reasons.append(f"{steal_fraction:.0%} of CPU time stolen by the hypervisor")
    runnable_mean = float(np.mean(samples.runnable)) if samples.runnable else None
    others_mean = float(np.mean(samples.others)) if samples.others else None
    seen = tuple(
        OtherTask(name, pid, count)
        for (name, pid), count in sorted(samples.seen.items(), key=lambda item: (-item[1], item[0]))
    )
    judged = len(samples.runnable) >= MIN_LOAD_SAMPLES
    if judged and runnable_mean > cores and (others_mean or 0) >= OTHERS:
        reasons.append(
            f"{runnable_mean:.1f} runnable tasks on average for {cores} cores "
            f"({others_mean:.1f} of them not this cell's{_named(seen, len(samples.runnable))})"
        )
    result = Interference(
        probe_before_s=probe_before_s,
        probe_after_s=probe_after_s,
        runnable_mean=runnable_mean,
        runnable_max=max(samples.runnable) if samples.runnable else None,
        others_mean=others_mean,
        load_samples=len(samples.runnable),
        others_seen=seen,
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

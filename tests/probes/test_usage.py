"""The cores and fresh pages of a cell's timed calls (`scanbench.probes.usage`)."""

from __future__ import annotations

import mmap
import time

import numpy as np
import pytest

from scanbench.probes.usage import CONTENDED, Meter, Usage
from scanbench.timing import TimingConfig, repeat


class FakeProcess:
    """A process whose clock, CPU time, faults and ready time advance as the test says."""

    def __init__(self) -> None:
        self.wall = self.cpu = self.ready_s = 0.0
        self.faults = 0

    def advance(self, wall: float, cpu: float, faults: int = 0, ready: float = 0.0) -> None:
        self.wall += wall
        self.cpu += cpu
        self.faults += faults
        self.ready_s += ready

    def rusage(self) -> tuple[float, float, int]:
        return self.wall, self.cpu, self.faults

    def ready(self) -> float:
        return self.ready_s


def test_only_the_calls_of_samples_two_to_n_are_counted():
    process = FakeProcess()
    meter = Meter(process.rusage, process.ready)
    evict = meter.before(lambda: process.advance(wall=1.0, cpu=1.0, faults=50))
    evict()  # a warm-up call: never closed by a sample, so never counted
    process.advance(wall=9.0, cpu=9.0, faults=900)
    for count in (1, 2, 3, 4):
        evict()  # the eviction of the caches before a cold sample: untimed
        process.advance(wall=0.5, cpu=1.0, faults=10, ready=0.01)  # two busy threads
        meter.sampled(count)
        process.advance(wall=3.0, cpu=3.0, faults=70)  # the loop's bookkeeping
    usage = meter.usage(samples=4)
    assert usage == Usage(
        calls=3, wall_s=1.5, run_s=3.0, ready_s=pytest.approx(0.03 + 0.0), minor_faults=30
    )
    assert usage.cores == pytest.approx(2.0) and usage.faults_per_call == 10
    assert usage.contended is False


def test_one_sample_is_measured_alone_and_a_busy_machine_is_said():
    process = FakeProcess()
    meter = Meter(process.rusage, process.ready)
    meter.before(None)()
    process.advance(wall=2.0, cpu=1.0)
    meter.sampled(1)
    usage = meter.usage(samples=1)
    assert usage.calls == 1 and usage.cores == pytest.approx(0.5)
    assert usage.contended is None  # no window to read the ready time over
    assert Meter(process.rusage, process.ready).usage(samples=0) is None
    busy = Usage(calls=5, wall_s=1.0, run_s=1.0, ready_s=2 * CONTENDED, minor_faults=0)
    assert busy.contended is True and busy.to_json()["cores"] == 1.0
    assert Usage(calls=5, wall_s=1.0, run_s=1.0, ready_s=None, minor_faults=0).contended is None


def _measured(run) -> Usage:
    meter = Meter()
    config = TimingConfig(warmup=1, min_time_s=0.0, min_count=6, max_count=6)
    timed = repeat(
        run, None, config, block=lambda out: out, on_sample=meter.sampled, before=meter.before(None)
    )
    return meter.usage(len(timed.samples))


def test_a_sleeping_call_uses_no_core_and_a_fresh_buffer_faults_its_pages():
    """Real readings around the real timing loop: a call that sleeps keeps no core busy;
    a call that writes a fresh 64 MiB mapping faults at least once per 2 MiB (a huge
    page; more with 4 KiB pages); one that writes a buffer allocated once faults none.

    The fresh buffer is an anonymous ``mmap`` of its own, not ``np.ones``: glibc serves a
    large ``malloc`` from the heap's free top when earlier work in the same process left
    enough there (CI, 2026-12-05: 0 faults per 64 MiB ``np.ones`` in an xdist worker), so
    only a mapping of its own is fresh whatever ran before."""
    asleep = _measured(lambda _: time.sleep(0.02))
    assert asleep.cores < 0.2, asleep
    nbytes = 64 * 2**20

    def write_fresh(_):
        mapping = mmap.mmap(-1, nbytes)
        array = np.frombuffer(mapping, dtype=np.float64)
        array.fill(1.0)
        del array  # the mapping cannot close while an array holds its buffer
        mapping.close()

    fresh = _measured(write_fresh)
    assert fresh.faults_per_call >= nbytes / (2 * 2**20), fresh
    kept = np.zeros(nbytes // 8)
    reused = _measured(lambda _: kept.fill(1.0))
    assert reused.faults_per_call < fresh.faults_per_call / 10, (reused, fresh)
    # the faults and the zeroing of the fresh pages are the kernel's CPU time; a write to
    # pages already mapped spends little there
    assert 0 < fresh.system_per_call <= fresh.run_s / fresh.calls + 1e-9, fresh
    assert reused.system_per_call < fresh.system_per_call, (reused, fresh)


def test_ready_time_of_the_cells_own_threads_is_no_busy_machine():
    """Wake-up latency of the cell's own pool threads counts as ready time on an idle
    machine: contended only when other programs took CPU time in the same window."""
    own = Usage(5, 1.0, 1.4, 0.2, 0, others_s=0.02, window_s=2.0)
    assert own.contended is False
    shared = Usage(5, 1.0, 1.0, 0.2, 0, others_s=0.8, window_s=2.0)
    assert shared.contended is True
    unread = Usage(5, 1.0, 1.0, 0.2, 0)  # no machine reading: the ready time alone
    assert unread.contended is True


def test_the_meter_reads_other_programs_cpu_time_over_its_window():
    process = FakeProcess()
    machine = {"busy": 100.0}

    def reading():
        return process.wall, machine["busy"], process.cpu

    meter = Meter(process.rusage, process.ready, reading)
    for count in (1, 2, 3):
        meter.before(None)()
        process.advance(wall=0.5, cpu=0.7, ready=0.2)  # ready 40% of the wall time
        machine["busy"] += 0.7 + 0.04  # the process's own CPU, and 0.04 s of others'
        meter.sampled(count)
    usage = meter.usage(samples=3)
    assert usage.others_s == pytest.approx(0.08) and usage.window_s == pytest.approx(1.0)
    assert usage.contended is False  # 0.08 of a core taken by others: below the line
    machine["busy"] += 0.5  # another program took half a core-second since
    assert meter.usage(samples=3).contended is True

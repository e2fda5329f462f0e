"""Two cells at once, timed alone (`scanbench.execution.overlap`): while one worker holds the
machine the other is stopped, its pauses are left out of its compile time and its timeout, and
the quiet worker's interference sees nobody else."""

from __future__ import annotations

import contextlib
import json
import math
import sys
import threading
import time

import pytest

from scanbench.cells import Cell
from scanbench.execution.heartbeat import Beacon
from scanbench.execution.interference import FAST_EVERY_S
from scanbench.execution.launcher import first_pass, measuring, run_cells
from scanbench.execution.overlap import Machine, cells_at_once, run_worker
from scanbench.execution.quiet_link import Pauses, Verdict, paused_within
from scanbench.execution.worker import first_call
from scanbench.invocation import Invocation
from scanbench.sampling import TimingConfig
from scanbench.stages import PAUSED_STAGE, WAITING_STAGE
from tests.support.paths import REPO_ROOT, SCENARIO_FILES
from tests.support.scenario_files.overlapping import COMPILE_CPU_S, COMPILING_TASK

OVERLAPPING = str(SCENARIO_FILES / "overlapping.py")

# A worker that spins for CPU_S of CPU time, noting the longest wall-clock gap between
# two of its loop turns (a stop shows as one) and the pauses the runner wrote for it.
SPINNER = """
import json, os, sys, time
from scanbench.execution.quiet_link import Pauses
cpu_s, out = float(sys.argv[1]), sys.argv[2]
start, last, gap = time.monotonic(), time.monotonic(), 0.0
begin = time.thread_time()
while time.thread_time() - begin < cpu_s:
    now = time.monotonic()
    gap, last = max(gap, now - last), now
end = time.monotonic()
json.dump({"gap": gap, "paused": Pauses.from_environ().between(start, end)}, open(out, "w"))
"""

# A worker that asks for the machine, holds it HOLD_S, and gives it back.
HOLDER = """
import sys, time
from scanbench.execution.quiet_link import QuietLink
time.sleep(float(sys.argv[1]))
link = QuietLink.from_environ()
link.acquire()
time.sleep(float(sys.argv[2]))
link.release()
"""


def test_paused_within_adds_up_the_overlaps():
    spans = [(1.0, 2.0), (3.0, 5.0)]
    assert paused_within(spans, 0.0, 10.0) == 3.0
    assert paused_within(spans, 1.5, 4.0) == 1.5
    assert paused_within(spans, 2.0, 3.0) == 0.0
    assert paused_within([], 0.0, 1.0) == 0.0


def test_a_worker_is_stopped_while_the_other_holds_the_machine(tmp_path):
    """The spinner (1.5 s of CPU, timeout 3 s) is stopped for the holder's 2.5 s: its wall
    time passes its timeout, the time it ran does not; the gap it saw is the pause it was
    told of. (Its CPU time is half its timeout, so that a machine loaded by another test
    worker, which gives it half a core, still does not time it out.)"""
    machine = Machine(2)
    results: dict[str, object] = {}
    spin_out = tmp_path / "spin.json"

    def spinner() -> None:
        folder = tmp_path / "spinner"
        folder.mkdir()
        command = [sys.executable, "-c", SPINNER, "1.5", str(spin_out)]
        results["spinner"] = run_worker(machine, command, _env(), 3.0, folder)

    def holder() -> None:
        command = [sys.executable, "-c", HOLDER, "0.3", "2.5"]
        results["holder"] = run_worker(machine, command, _env(), 60.0, tmp_path)

    threads = [threading.Thread(target=spinner), threading.Thread(target=holder)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - started
    spun, held = results["spinner"], results["holder"]
    assert held.returncode == 0, held.stderr
    assert spun.returncode == 0 and not spun.timed_out, spun.stderr
    seen = json.loads(spin_out.read_text())
    assert 2.3 <= spun.paused_s <= 3.5, spun.paused_s  # stopped while the holder held
    assert abs(seen["paused"] - spun.paused_s) < 0.05  # told of it, to leave it out
    assert seen["gap"] >= 0.9 * spun.paused_s  # and it really did not run meanwhile
    assert wall > 3.0  # longer than its timeout on the wall clock, not in time it ran
    assert held.interference["probe_before_s"] and held.interference["probe_after_s"]


# A worker that takes the machine, ends its samples twice, sampling again after the
# first when the runner's answer says disturbed, and prints each answer
RESAMPLER = """
import sys
from scanbench.execution.quiet_link import QuietLink
link = QuietLink.from_environ()
link.acquire()
answers = [link.timed_end()]
if answers[0] == "disturbed":
    link.again()
    answers.append(link.timed_end())
link.release()
print([str(answer) for answer in answers], file=sys.stderr)
"""


def test_the_runner_answers_the_end_of_samples_with_its_verdict(tmp_path, monkeypatch):
    """Over real pipes: the probe planted to drift 3x across the first sampling makes the
    runner answer "disturbed"; the worker samples again, the runner keeps the verdict on
    the first sampling (`Finished.windows`) and judges the second on its own probes."""
    from scanbench.execution import interference, overlap

    for threshold in ("OTHERS", "STEAL_FRACTION"):  # a parallel test run's load and steal
        monkeypatch.setattr(interference, threshold, math.inf)
    probes = iter([1.0, 3.0])
    monkeypatch.setattr(overlap, "calibration_probe", lambda: next(probes, 1.0))
    done = run_worker(Machine(2), [sys.executable, "-c", RESAMPLER], _env(), 60.0, tmp_path)
    assert done.returncode == 0, done.stderr
    (first,) = done.windows
    assert first["disturbed"] and (first["probe_before_s"], first["probe_after_s"]) == (1.0, 3.0)
    assert first["reasons"][0].startswith("the calibration probe took 3.00x")
    assert not done.interference["disturbed"] and done.interference["probe_after_s"] == 1.0


def test_a_machine_busy_with_other_programs_is_not_sampled_again(tmp_path, monkeypatch):
    """Over real pipes: the first sampling is found disturbed (the probe drifts 3x), but
    other programs still run right after it (`still_busy`, planted), so the runner answers
    "not worth sampling again": the worker keeps its samples, and the verdict on them
    still says disturbed (`scanbench.execution.remeasure` adds why they were kept)."""
    from scanbench.execution import interference, overlap

    for threshold in ("OTHERS", "STEAL_FRACTION"):
        monkeypatch.setattr(interference, threshold, math.inf)
    probes = iter([1.0, 3.0])
    monkeypatch.setattr(overlap, "calibration_probe", lambda: next(probes, 1.0))
    asked = []
    monkeypatch.setattr(overlap, "still_busy", lambda i: asked.append(i) or "still busy")
    done = run_worker(Machine(2), [sys.executable, "-c", RESAMPLER], _env(), 60.0, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "['busy']" in done.stderr and not done.windows  # the worker kept its samples
    assert done.interference["disturbed"] and asked[0].probe_after_s == 3.0


# A worker measured on part of its work and then whole (`scanbench.execution.worker`):
# each sampling's end answered, the machine given back between them, the second sampling
# announced as a new measurement (`anew`) before its grant
REDUCED_THEN_WHOLE = """
import sys
from scanbench.execution.quiet_link import QuietLink
link = QuietLink.from_environ()
link.acquire()
answers = [link.timed_end()]
link.release()
link.anew()
link.acquire()
answers.append(link.timed_end())
link.release()
print([str(answer) for answer in answers], file=sys.stderr)
"""


def test_a_cell_measured_anew_is_judged_by_the_probes_around_its_new_samples(tmp_path, monkeypatch):
    """Over real pipes: the probe planted to drift 3x across the second (whole) sampling
    only. The runner answers its end "disturbed", and the cell's interference is that of
    the whole sampling, not of the reduced one before it (which closed the watch: before
    `anew`, the whole samples went unjudged and the cell kept the reduced one's verdict)."""
    from scanbench.execution import interference, overlap

    for threshold in ("OTHERS", "STEAL_FRACTION"):  # a parallel test run's load and steal
        monkeypatch.setattr(interference, threshold, math.inf)
    probes = iter([1.0, 1.0, 1.0, 3.0])
    monkeypatch.setattr(overlap, "calibration_probe", lambda: next(probes, 1.0))
    command = [sys.executable, "-c", REDUCED_THEN_WHOLE]
    done = run_worker(Machine(2), command, _env(), 60.0, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "['steady', 'disturbed']" in done.stderr  # the whole sampling's end: disturbed
    assert done.windows == ()  # nothing was set aside
    judged = done.interference
    assert judged["disturbed"] and (judged["probe_before_s"], judged["probe_after_s"]) == (1.0, 3.0)


def test_a_new_worker_waits_while_another_holds_the_machine(tmp_path):
    machine = Machine(2)
    results = {}

    def holder() -> None:
        command = [sys.executable, "-c", HOLDER, "0", "1.0"]
        results["holder"] = run_worker(machine, command, _env(), 60.0, tmp_path)

    thread = threading.Thread(target=holder)
    thread.start()
    time.sleep(0.6)  # the holder has the machine by now (Python start-up + 0 s)
    late = run_worker(machine, [sys.executable, "-c", "pass"], _env(), 60.0, tmp_path)
    thread.join()
    assert late.returncode == 0 and results["holder"].returncode == 0
    assert late.waited_s >= 0.2


# A worker that asks for the machine at once, notes on stderr when it got it (the
# monotonic clock is the machine's), holds it HOLD_S and gives it back.
NOTING_HOLDER = """
import sys, time
from scanbench.execution.quiet_link import QuietLink
link = QuietLink.from_environ()
link.acquire()
print("granted", time.monotonic(), file=sys.stderr)
time.sleep(float(sys.argv[1]))
link.release()
"""


def _granted_at(stderr: str) -> float:
    return float(
        next(line for line in stderr.splitlines() if line.startswith("granted")).split()[1]
    )


def test_the_runners_own_work_never_runs_beside_a_quiet_stage(tmp_path):
    """`Machine.untimed` (a finished cell's statistics, computed by the runner): it
    starts only once the holder has given the machine back, and a worker asking for the
    machine meanwhile is granted it only when that work is done."""
    machine = Machine(2)
    results = {}

    def holder(name: str, hold_s: float) -> None:
        command = [sys.executable, "-c", NOTING_HOLDER, str(hold_s)]
        results[name] = run_worker(machine, command, _env(), 60.0, tmp_path)

    first = threading.Thread(target=holder, args=("first", 1.0))
    first.start()
    deadline = time.monotonic() + 30
    while not machine.held() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert machine.held()
    with machine.untimed():
        began = time.monotonic()
        assert not machine.held()
        second = threading.Thread(target=holder, args=("second", 0.1))
        second.start()
        time.sleep(1.0)  # the second worker starts and asks for the machine meanwhile
        assert not machine.held()
        ended = time.monotonic()
    first.join()
    second.join()
    for name in ("first", "second"):
        assert results[name].returncode == 0, results[name].stderr
    assert began >= _granted_at(results["first"].stderr) + 0.9  # after the first one's hold
    assert _granted_at(results["second"].stderr) >= ended  # not before the work was done


class RecordingLink:
    """A `QuietLink` stand-in that notes each call instead of asking a runner."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def acquire(self) -> None:
        self.calls.append("acquire")

    def timed_end(self) -> Verdict:
        self.calls.append("timed end")
        return Verdict.STEADY

    def release(self) -> None:
        self.calls.append("release")

    def anew(self) -> None:
        self.calls.append("anew")


def test_a_beacon_asks_for_the_machine_around_quiet_stages():
    """A reduced cell measured again, whole, says so (`anew`) before its next grant, with
    the machine given back in between: the runner's new watch opens right before the
    whole call's samples."""
    link = RecordingLink()
    beacon = Beacon(None, link=link)
    for stage in ("load scenario", "prepare and check", "sampling"):
        beacon.stage(stage)
    beacon.anew()  # the reduced size's samples are dropped: measured again, whole
    beacon.stage("prepare and check")
    beacon.stage("sampling")
    beacon.stage("counting")
    beacon.stop()
    assert link.calls == ["acquire", "timed end", "release", "anew", "acquire", "timed end"]
    assert WAITING_STAGE in beacon.stages and PAUSED_STAGE not in beacon.stages
    alone = Beacon(None)  # no runner: nothing to say
    alone.anew()
    alone.stage("sampling")
    assert not alone.anew_pending


class AnsweringLink(RecordingLink):
    """A `RecordingLink` whose runner finds the machine disturbed over the first
    sampling only."""

    def timed_end(self) -> Verdict:
        super().timed_end()
        return Verdict.DISTURBED if self.calls.count("timed end") == 1 else Verdict.STEADY

    def again(self) -> None:
        self.calls.append("again")


def test_a_beacon_says_once_per_sampling_that_the_samples_ended():
    """The worker says its samples ended as soon as it has tested them (`timed_end`,
    answered with the runner's verdict), samples again after a disturbed one (`again`),
    and the stage change after the kept samples says nothing more."""
    link = AnsweringLink()
    beacon = Beacon(None, link=link)
    beacon.stage("prepare: check")
    beacon.stage("sampling")
    assert beacon.timed_end() is Verdict.DISTURBED  # the worker samples again
    assert beacon.timed_end() is Verdict.STEADY  # said already for this sampling
    beacon.again()
    assert beacon.timed_end() is Verdict.STEADY  # the new samples: not disturbed
    beacon.stage("counting")  # the samples' end was said: only the quiet stage goes on
    beacon.stage("memory")
    assert link.calls == ["acquire", "timed end", "again", "timed end", "release"]
    alone = Beacon(None)  # no runner (a notebook's compare): nothing to say, nothing found
    alone.stage("sampling")
    assert alone.timed_end() is Verdict.STEADY


def test_the_interference_is_read_around_the_timed_samples_only(monkeypatch):
    """The closing probes are taken when the samples end (`timed end`): a core that
    slows down during the counting stages after them judges no sample."""
    from scanbench.execution import overlap

    probes = iter([4.0, 4.1, 9.0, 9.0])  # before, after the samples, then (slow) counting
    monkeypatch.setattr(overlap, "calibration_probe", lambda: next(probes))
    monkeypatch.setattr(overlap, "sample_load", lambda pid, samples: contextlib.nullcontext())
    watch = overlap.QuietWatch(pid=0)
    watch.begin()  # sampling
    watch.close()  # its samples ended; counting goes on holding the machine
    watch.end()  # preparing to count: released
    watch.begin()  # counting
    watch.end()
    assert (watch.probe_before, watch.probe_after) == (4.0, 4.1)
    assert not watch.assess()["disturbed"]
    timed_nothing = overlap.QuietWatch(pid=0)  # a counts-only worker: its last release
    timed_nothing.begin()
    timed_nothing.end()
    assert (timed_nothing.probe_before, timed_nothing.probe_after) == (9.0, 9.0)


def test_stage_times_leave_pauses_out(tmp_path):
    now = [0.0]
    pauses = tmp_path / "pauses.json"
    pauses.write_text(json.dumps([[1.0, 3.0]]))
    beacon = Beacon(None, clock=lambda: now[0], pauses=Pauses(pauses))
    beacon.stage("prepare and check")
    now[0] = 5.0
    beacon.stop()
    assert beacon.stages == {"prepare and check": 3.0, PAUSED_STAGE: 2.0}


def test_the_first_call_leaves_out_only_the_pauses_within_it():
    """The runner stops the worker for 0.5 s just after the 0.05 s call's end is read and
    before anything else is: that pause is no part of the call's time (it once made the
    call -0.45 s); a pause within the call is left out of it."""
    now, reads_after = [0.0], [0]

    def clock() -> float:
        if reads_after[0]:  # the stop lands before the second read after the call
            reads_after[0] += 1
            if reads_after[0] == 3:
                now[0] += 0.5
        return now[0]

    def run(prepared):
        now[0] += 0.05
        reads_after[0] = 1
        return prepared

    spans = [(0.05, 0.55)]
    output, seconds = first_call(run, 7, None, lambda a, b: paused_within(spans, a, b), clock)
    assert output == 7 and seconds == pytest.approx(0.05)
    assert clock() == pytest.approx(0.55)  # the stop did happen after the call
    now[0], reads_after[0], spans = 0.0, 0, [(0.01, 0.03)]
    _, seconds = first_call(run, 7, None, lambda a, b: paused_within(spans, a, b), clock)
    assert seconds == pytest.approx(0.03)


@pytest.mark.parametrize(
    ("overlap", "platform", "slots"),
    [(True, "cpu", 2), (False, "cpu", 1), (True, "gpu", 1)],
)
def test_two_cells_at_once_only_on_a_cpu_with_cores_to_spare(monkeypatch, overlap, platform, slots):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1}, raising=False)
    got, why = cells_at_once(overlap, {"platform": platform})
    assert got == slots and why
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0}, raising=False)
    assert cells_at_once(True, {"platform": "cpu"})[0] == 1


@pytest.mark.solo
def test_a_compile_beside_a_timed_cell_is_paused_and_its_time_left_out():
    """``compiling`` prepares for 3 s of CPU while ``timed`` (0.5 s of prepare, then 1 s
    of samples) is timed: ``compiling`` is stopped meanwhile, its compile time is the 3 s
    it ran, not the wall time it spanned, and ``timed``'s load samples never saw it
    runnable (they name every other runnable task; a kernel thread or another program at
    work on the machine may be among them, and is not what this checks)."""
    timing = TimingConfig(warmup=0, min_time_s=1.0, max_time_s=1.0, target_width=0.0)
    machine = Machine(2)
    cells = [
        Cell("overlapping", name, "smoke", "float64", 0, OVERLAPPING)
        for name in ("compiling", "timed")
    ]
    # measured once: a cell measured again (a 3.6 us call's samples often have a slow
    # spell on this VM) keeps the second measurement, which nothing ran beside
    measure = first_pass(measuring(timing, 120.0, probes=False, machine=machine), remeasure=0)
    compiling, timed = run_cells(cells, measure, False, machine=machine)
    assert compiling.status == "ok", compiling.error
    assert timed.status == "ok", timed.error
    phases = compiling.extra["phases_s"]
    assert phases[PAUSED_STAGE] >= 0.8  # stopped for timed's samples
    assert COMPILE_CPU_S * 0.95 <= compiling.prepare_s <= COMPILE_CPU_S * 1.25
    assert compiling.extra["cells_at_once"] == 2
    interference = timed.interference
    assert interference["load_samples"] >= 0.5 / FAST_EVERY_S, interference
    assert COMPILING_TASK not in {task["name"] for task in interference["others_seen"]}, (
        interference
    )


def _env() -> dict[str, str]:
    import os

    root = str(REPO_ROOT)
    return {**os.environ, "PYTHONPATH": root}


def test_only_the_counted_calls_hold_the_machine():
    """A cell counted at 2, 3 and 4 steps (`scanbench.probes.extrapolation`) prepares each size
    and calls it once untimed without the machine; it holds it for each counted call."""
    from scanbench.execution.worker import run_cell
    from scanbench.stages import COUNTING_STAGE as COUNTING
    from scanbench.stages import PREPARING_STAGE as PREPARING
    from tests.execution.test_budget import BUDGET, _cell

    link = RecordingLink()
    beacon = Beacon(None, link=link)
    record = run_cell(_cell("sleepy"), BUDGET, probes=True, beacon=beacon)
    assert record.status == "ok", record.error
    assert record.counts.scale == 1.0 and record.sampling["scaled"]
    phases = record.extra["phases_s"]
    assert phases[PREPARING] >= 3 * 2 * 0.02  # three sizes' plain calls, 2-4 steps each
    assert COUNTING in phases
    # sampling (acquire), its end, then per size: prepare (release), count (acquire)
    assert link.calls == ["acquire", "timed end"] + ["release", "acquire"] * 3


@pytest.mark.parametrize("at_once", [1, 2])
def test_reports_say_when_cells_ran_two_at_a_time(at_once):
    import dataclasses

    from scanbench.execution.worker import run_cell
    from scanbench.reports.markdown import render
    from scanbench.reports.model import build
    from scanbench.results import Run
    from tests.execution.test_budget import BUDGET, _cell

    record = run_cell(_cell("quick"), BUDGET, probes=False)
    record = dataclasses.replace(record, extra={**record.extra, "cells_at_once": at_once})
    markdown = render(build([Run({}, Invocation(), (record,))]))
    assert ("2 cells at a time" in markdown) == (at_once == 2)


def test_giving_the_machine_back_waits_for_the_closing_probes():
    """`QuietLink.release` returns only once the runner answers (it takes the closing
    calibration probe first, which must not run beside the worker's next stage)."""
    import os

    from scanbench.execution.quiet_link import QuietLink

    request_r, request_w = os.pipe()
    grant_r, grant_w = os.pipe()
    link = QuietLink(request_w, grant_r)
    returned = threading.Event()
    thread = threading.Thread(target=lambda: (link.release(), returned.set()))
    thread.start()
    assert os.read(request_r, 1) == b"r"
    assert not returned.wait(0.3)  # still waiting for the runner
    os.write(grant_w, b"g")
    assert returned.wait(5)
    thread.join()
    for fd in (request_r, request_w, grant_r, grant_w):
        os.close(fd)


def test_a_stopped_worker_is_said_to_be_stopped(tmp_path):
    import os
    import signal
    import subprocess

    from scanbench.execution.heartbeat import heartbeat
    from scanbench.execution.overlap import is_stopped

    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert not is_stopped(process.pid)
        os.kill(process.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 5
        while not is_stopped(process.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        lines: list[str] = []
        progress = tmp_path / "progress.txt"
        progress.write_text("preparing and checking")
        with heartbeat(
            "toy/cell", progress, lines.append, 0.05, stopped=lambda: is_stopped(process.pid)
        ):
            time.sleep(0.2)
        assert lines and "preparing and checking (stopped while another cell is timed)" in lines[0]
    finally:
        os.kill(process.pid, signal.SIGCONT)
        process.kill()
        process.wait()


# A stand-in runner: starts a cell worker as the Machine does, stops it, then sleeps.
MINI_RUNNER = """
import os, signal, sys, time
from scanbench.execution.processes import start_worker
folder = sys.argv[1]
spec, out = folder + "/spec.json", folder + "/record.json"
command = [sys.executable, "-m", "scanbench.execution.worker", "cell", spec, out]
worker = start_worker(command, dict(os.environ), death_signal=signal.SIGCONT)
print(worker.pid, flush=True)
time.sleep(3)  # past the worker's start-up, into its (hanging) cell
os.kill(worker.pid, signal.SIGSTOP)
print("stopped", flush=True)
time.sleep(300)
"""


def test_a_stopped_worker_whose_run_is_killed_exits_and_cleans_up(tmp_path):
    """SIGKILL the runner while its worker is SIGSTOPped: the kernel's parent-death
    signal (SIGCONT for these workers) wakes it, and its parent watch removes its temp
    folder and exits (with SIGTERM, as before, it stayed stopped for ever)."""
    import subprocess

    from scanbench.cells import cell_spec
    from scanbench.execution.overlap import is_stopped

    folder = tmp_path / "scanbench-cell-orphan"
    folder.mkdir()
    toy = str(SCENARIO_FILES / "toy.py")
    spec = cell_spec(Cell("toy", "hang", "smoke", "float64", 0, toy), TimingConfig())
    (folder / "spec.json").write_text(json.dumps(spec))
    runner = subprocess.Popen(
        [sys.executable, "-c", MINI_RUNNER, str(folder)],
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    pid = int(runner.stdout.readline())
    assert runner.stdout.readline().strip() == "stopped"
    deadline = time.monotonic() + 5
    while not is_stopped(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert is_stopped(pid)
    runner.kill()
    runner.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (folder.exists() or _alive(pid)):
        time.sleep(0.1)
    assert not _alive(pid), "the stopped worker outlived its run"
    assert not folder.exists(), "its temp folder was left behind"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_cells_flag_check_never_runs_beside_another_cells_quiet_stage(monkeypatch):
    """Checking a backend's XLA flags starts a fresh interpreter with JAX: the runner's own
    work, so it waits until nobody holds the machine and holds off every grant meanwhile."""
    from scanbench.execution import launcher

    machine = Machine(2)
    seen = []

    def noting(cell, python, environ):
        seen.append((machine.held(), machine._untimed))
        return "refused: noted"

    monkeypatch.setattr(launcher, "refused_flags", noting)
    toy = str(SCENARIO_FILES / "toy.py")
    cell = Cell("toy", "good", "smoke", "float64", 0, toy)
    record = launcher.run_cell_in_worker(cell, TimingConfig(), 60, machine=machine)
    assert record.status == "failed" and "refused: noted" in record.error
    assert seen == [(False, 1)]

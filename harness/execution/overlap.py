"""Two cells at once, timed alone: workers overlap their untimed phases only.

A cell's worker spends most of its life in phases that time nothing: starting Python,
importing JAX, compiling, checking the first call (most of a `smoke` run). On a
machine with a second core, a second worker can do those while the first one does them
too. What is timed or counted must still run with the machine to itself, so:

- the worker asks for the machine before a *quiet* stage (`QUIET_STAGES`: sampling,
  counting), says when its timed samples end (the closing interference probes are taken
  then, `QuietWatch.close`, and the runner answers whether they found the machine
  disturbed: the worker may then set those samples aside and sample again, still holding
  the machine, the probes opened anew and the verdict on the samples set aside kept,
  `Worker.windows`), and gives it back when it goes on with an untimed one or exits
  (`scanbench.execution.quiet_link.QuietLink`, two pipes; `scanbench.execution.heartbeat.Beacon`
  does it as stages change);
- the runner (`Machine`) then stops every other worker (SIGSTOP, and waits until each of
  its threads is stopped), takes the interference probes (`scanbench.execution.interference`: the
  calibration probe, steal and load, runnable tasks sampled while the quiet stage runs),
  grants, and continues the others (SIGCONT) when the machine is given back;
- a stopped worker's clocks do not see the stop, so the runner writes each pause to a file
  the worker reads (`scanbench.execution.quiet_link.Pauses`): its compile and first-call times and
  its stage times leave the pauses out, and the time paused is a stage of its own;
- a new worker starts only when nobody holds the machine; its timeout counts only the
  time it was not stopped;
- the runner's own work between cells (`Machine.untimed`: a finished cell's statistics,
  whose bootstrap grows with its samples; the check of a cell's XLA flags, a fresh
  interpreter starting JAX) waits until nobody holds the
  machine, and nobody is granted it until that work is done: beside another cell's
  samples, on the same pair of cores, it would be load on them (performance log,
  2026-11-24, "The runner's own work beside a timed cell").

With one slot (``--no-overlap``, a GPU, a multi-process run, one core) the same protocol
runs and every grant is immediate. What two slots change is said in the report: compile
times are taken while another worker may be compiling on the other core.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ..sharding.distributed import COORDINATOR, usable_cores
from .forkserver import Forked
from .interference import (
    Interference,
    LoadSamples,
    assess,
    calibration_probe,
    cpu_times,
    load_average,
    sample_load,
    still_busy,
    thread_states,
)
from .processes import Finished, finish_worker, start_worker
from .quiet_link import (
    ACQUIRE,
    AGAIN,
    ANEW,
    ANSWERED,
    BUSY,
    DISTURBED,
    PAUSES,
    PAUSES_FILE,
    QUIET_FDS,
    RELEASE,
    TIMED_END,
    clock,
)

STOP_WAIT_S = 2.0  # how long a SIGSTOPped worker may take to be stopped in every thread


def cells_at_once(overlap: bool, environment: Mapping[str, Any]) -> tuple[int, str]:
    """How many cells a run keeps alive at once, and a line that says why: two on a CPU
    with at least two usable cores, one when ``overlap`` is off, on an accelerator (each
    worker would hold the device and its memory), in a multi-process run (every process
    must make the same calls in the same order) or on one core."""
    alone = "one cell at a time"
    if not overlap:
        return 1, f"{alone} (--no-overlap)"
    if environment.get("platform") != "cpu":
        return 1, f"{alone}: on {environment.get('platform')}, cells do not share the device"
    if COORDINATOR in os.environ:
        return 1, f"{alone}: a multi-process run"
    if usable_cores() < 2:
        return 1, f"{alone}: one core"
    return 2, (
        "two cells at a time: one compiles while the other does too or is timed; timing and "
        "counting run with the other stopped (--no-overlap: one at a time)"
    )


@dataclasses.dataclass
class QuietWatch:
    """The interference measured over a worker's timed stages (`scanbench.execution.interference`):
    probe and counters at the first grant and when its timed samples end (`close`; at
    the last release for a worker that timed nothing), runnable tasks sampled while it
    holds the machine until then. What the machine did during the counting stages after
    the samples judges no sample: a drift there sent the cell to a fresh worker for
    nothing (performance log, 2026-11-27)."""

    pid: int
    probe_before: float | None = None
    probe_after: float | None = None
    steal: list[Any] = dataclasses.field(default_factory=lambda: [None, None])
    loads: list[Any] = dataclasses.field(default_factory=lambda: [None, None])
    probes_s: float = 0.0
    samples: Any = None
    closed: bool = False  # the timed samples ended: nothing after them is watched
    _sampler: contextlib.ExitStack | None = None

    def begin(self) -> None:

        if self.closed:
            return
        started = time.perf_counter()
        if self.probe_before is None:
            self.steal[0], self.loads[0] = cpu_times(), load_average()
            self.probe_before = calibration_probe()
        self.samples = self.samples or LoadSamples()
        self._sampler = contextlib.ExitStack()
        self._sampler.enter_context(sample_load(self.pid, self.samples))
        self.probes_s += time.perf_counter() - started

    def end(self) -> None:

        if self.closed:
            return
        started = time.perf_counter()
        if self._sampler is not None:
            self._sampler.close()
            self._sampler = None
        self.probe_after = calibration_probe()
        self.steal[1], self.loads[1] = cpu_times(), load_average()
        self.probes_s += time.perf_counter() - started

    def close(self) -> Interference | None:
        """The worker's timed samples ended (it still holds the machine): the closing
        probes now, and nothing watched after. The verdict on them (None when they had
        ended already)."""
        if self.closed:
            return None
        self.end()
        self.closed = True
        return self.interference()

    def interference(self) -> Interference:
        """The verdict on what was watched so far (`scanbench.execution.interference.assess`)."""
        return assess(
            self.probe_before,
            self.probe_after,
            self.samples or LoadSamples(),
            (self.steal[0], self.steal[1]),
            (self.loads[0], self.loads[1]),
            os.cpu_count() or 1,
        )

    def assess(self) -> dict[str, Any]:
        """`interference`, as JSON (a record's ``interference``)."""
        return self.interference().to_json()


def _verdict(watch: QuietWatch) -> bytes:
    """The answer to a worker whose samples ended: ``ANSWERED`` when the closing probes
    found the machine undisturbed over them, ``DISTURBED`` when they did not (the worker
    samples again), ``BUSY`` when other programs disturbed it and still run right after
    (`still_busy`: sampled again, the samples would be disturbed the same way; the
    worker keeps them, judged disturbed as usual, and `scanbench.execution.remeasure`
    adds why they were not measured again)."""
    found = watch.close()
    if found is None or not found.disturbed:
        return ANSWERED
    return BUSY if still_busy(found) is not None else DISTURBED


@dataclasses.dataclass
class Worker:
    """A running worker as the `Machine` sees it."""

    process: subprocess.Popen | Forked
    pauses_path: Path | None
    grant_fd: int
    watch: QuietWatch
    waited_s: float = 0.0  # before it could start (another worker held the machine)
    pauses: list[tuple[float, float]] = dataclasses.field(default_factory=list)
    stopped_at: float | None = None
    # the verdicts (`QuietWatch.assess`) on the samplings the worker set aside and took
    # again, in order
    windows: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def sampled_again(self, holding: bool) -> None:
        """The worker sets its last samples aside and samples again: the verdict on them
        is kept, and a new watch opened (its probes now, when the worker holds the
        machine)."""
        self.windows.append(self.watch.assess())
        self._watch_anew(holding)

    def measured_anew(self, holding: bool) -> None:
        """The worker drops its measurement so far (a reduced size's) and measures its
        cell anew: the verdicts on its samplings so far go with them, and a new watch
        opens (its probes at the worker's next grant, or now if it holds the machine)."""
        self.windows.clear()
        self._watch_anew(holding)

    def _watch_anew(self, holding: bool) -> None:
        """A new watch, keeping the probes' time so far; begun now if ``holding``."""
        self.watch = QuietWatch(self.process.pid, probes_s=self.watch.probes_s)
        if holding:
            self.watch.begin()

    def paused_s(self, now: float | None = None) -> float:
        total = sum(b - a for a, b in self.pauses)
        if self.stopped_at is not None:
            total += (now if now is not None else clock()) - self.stopped_at
        return total


class Machine:
    """Who may use the machine: up to ``slots`` workers alive, at most one in a quiet
    stage, every other worker stopped while it is (see the module doc)."""

    def __init__(self, slots: int = 1) -> None:
        if slots < 1:
            raise ValueError(f"slots must be at least 1, got {slots}")
        self.slots = slots
        self._cond = threading.Condition()
        self._live: list[Worker] = []
        self._holder: Worker | None = None
        self._untimed = 0  # the runner's own jobs in progress (`untimed`)
        self._closed = False

    @contextlib.contextmanager
    def running(
        self,
        start: Callable[[dict[str, str], tuple[int, ...]], subprocess.Popen | Forked],
        environ: dict[str, str],
        folder: Path | None,
    ) -> Iterator[Worker]:
        """Start a worker (``start(environ, pass_fds)``) once a slot is free and nobody
        holds the machine; serve its requests while the block runs; forget it after."""
        request_r, request_w = os.pipe()
        grant_r, grant_w = os.pipe()
        pauses_path = Path(folder, PAUSES_FILE) if folder is not None else None
        env = {**environ, QUIET_FDS: f"{request_w},{grant_r}"}
        if pauses_path is not None:
            env[PAUSES] = str(pauses_path)
        asked = clock()
        try:
            with self._cond:
                self._cond.wait_for(
                    lambda: self._closed or (self._holder is None and len(self._live) < self.slots)
                )
                if self._closed:
                    raise RuntimeError("the machine was shut down")
                process = start(env, (request_w, grant_r))
                worker = Worker(process, pauses_path, grant_w, QuietWatch(process.pid))
                worker.waited_s = clock() - asked
                self._live.append(worker)
        except BaseException:
            for fd in (request_r, grant_w):
                os.close(fd)
            raise
        finally:
            os.close(request_w)
            os.close(grant_r)
        server = threading.Thread(
            target=self._serve, args=(worker, request_r), name="scanbench-quiet", daemon=True
        )
        server.start()
        try:
            yield worker
        finally:
            self.resume_for_exit(worker)
            server.join(timeout=10)
            with self._cond:
                self._end_quiet(worker)
                if worker in self._live:
                    self._live.remove(worker)
                self._cond.notify_all()
            with contextlib.suppress(OSError):
                os.close(grant_w)

    def held(self) -> bool:
        """Whether a worker holds the machine (is in a quiet stage) right now."""
        with self._cond:
            return self._holder is not None

    @contextlib.contextmanager
    def untimed(self) -> Iterator[None]:
        """A block of the runner's own work that times nothing: it starts once nobody
        holds the machine, and no worker is granted it until the block ends (the block
        may run beside other workers' untimed stages, as they run beside each other)."""
        with self._cond:
            self._cond.wait_for(lambda: self._holder is None or self._closed)
            self._untimed += 1
        try:
            yield
        finally:
            with self._cond:
                self._untimed -= 1
                self._cond.notify_all()

    def _serve(self, worker: Worker, request_fd: int) -> None:
        """Answer one worker's requests until it exits (its end of the pipe closes)."""
        answer = ANSWERED
        try:
            while True:
                try:
                    byte = os.read(request_fd, 1)
                except OSError:
                    byte = b""
                if byte == ACQUIRE:
                    self._acquire(worker)
                elif byte == RELEASE:
                    self._release(worker)
                elif byte == TIMED_END:
                    with self._cond:  # the worker holds the machine: nobody else runs
                        answer = _verdict(worker.watch)
                elif byte == AGAIN:
                    with self._cond:
                        worker.sampled_again(holding=self._holder is worker)
                elif byte == ANEW:
                    with self._cond:
                        worker.measured_anew(holding=self._holder is worker)
                else:  # exited
                    break
                with contextlib.suppress(OSError):
                    os.write(worker.grant_fd, answer)
                answer = ANSWERED
        finally:
            os.close(request_fd)
            with self._cond:
                self._end_quiet(worker)

    def _acquire(self, worker: Worker) -> None:
        with self._cond:
            self._cond.wait_for(
                lambda: self._holder is worker or (self._holder is None and not self._untimed)
            )
            self._holder = worker
            for other in self._live:
                if other is not worker:
                    _pause(other)
            worker.watch.begin()

    def _release(self, worker: Worker) -> None:
        with self._cond:
            self._end_quiet(worker)

    def _end_quiet(self, worker: Worker) -> None:  # with self._cond held
        """If ``worker`` holds the machine: its closing probes, then the others go on."""
        if self._holder is not worker:
            return
        worker.watch.end()
        self._holder = None
        for other in self._live:
            if other is not worker:
                _resume(other)
        self._cond.notify_all()

    def resume_for_exit(self, worker: Worker) -> None:
        """Continue a stopped worker so that it can take a SIGTERM or exit."""
        with self._cond:
            _resume(worker)

    def shutdown(self, terminate: bool = False) -> None:
        """Stop admitting workers and continue every stopped one, so that it can take a
        signal; with ``terminate``, send each live worker SIGTERM (a run was interrupted:
        the worker removes its temp folder and exits; its thread then returns)."""
        with self._cond:
            self._closed = True
            for worker in self._live:
                _resume(worker)
                if terminate and worker.process.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        worker.process.terminate()
            self._cond.notify_all()


def _pause(worker: Worker) -> None:
    """Stop ``worker``; its pause is dated from when every thread is stopped, so a span
    the worker is told of (`scanbench.execution.quiet_link.Pauses`) holds no time it ran."""
    if worker.stopped_at is not None or worker.process.poll() is not None:
        return
    try:
        os.kill(worker.process.pid, signal.SIGSTOP)
    except ProcessLookupError:
        return
    _wait_stopped(worker.process.pid)
    worker.stopped_at = clock()


def is_stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is stopped (SIGSTOP) right now."""
    states = thread_states(pid)
    return bool(states) and all(state in ("T", "t") for state in states)


def _wait_stopped(pid: int, limit_s: float = STOP_WAIT_S) -> None:
    """Until every thread of ``pid`` is stopped (or gone): SIGSTOP is asynchronous."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        states = thread_states(pid)
        if states is None or all(state in ("T", "t", "Z", "X") for state in states):
            return
        time.sleep(0.001)


def _resume(worker: Worker) -> None:
    if worker.stopped_at is None:
        return
    worker.pauses.append((worker.stopped_at, clock()))
    worker.stopped_at = None
    if worker.pauses_path is not None:
        tmp = worker.pauses_path.with_suffix(".tmp")
        with contextlib.suppress(OSError):
            tmp.write_text(json.dumps(worker.pauses), encoding="utf-8")
            os.replace(tmp, worker.pauses_path)
    with contextlib.suppress(ProcessLookupError):
        os.kill(worker.process.pid, signal.SIGCONT)


def wait_active(
    process: subprocess.Popen | Forked, worker: Worker, timeout_s: float, poll_s: float = 0.5
) -> str:
    """``process.communicate()``'s stderr, raising `subprocess.TimeoutExpired` once the
    worker has run ``timeout_s`` seconds not counting the time it was stopped."""
    started = clock()
    while True:
        try:
            _, stderr = process.communicate(timeout=poll_s)
            return stderr or ""
        except subprocess.TimeoutExpired:
            now = clock()
            if now - started - worker.paused_s(now) >= timeout_s:
                raise


def run_worker(
    machine: Machine,
    command: list[str],
    environ: dict[str, str],
    timeout_s: float,
    folder: Path | None,
    while_running: Callable[[int], AbstractContextManager] | None = None,
) -> Finished:
    """`scanbench.execution.processes.run_worker_process` under a `Machine`: started when admitted,
    its quiet stages served, its timeout counted on the time it was not stopped."""
    with machine.running(
        lambda env, fds: start_worker(command, env, fds, death_signal=signal.SIGCONT),
        environ,
        folder,
    ) as worker:
        finished = finish_worker(
            worker.process,
            timeout_s,
            while_running,
            wait=lambda: wait_active(worker.process, worker, timeout_s),
            before_stop=lambda: machine.resume_for_exit(worker),
        )
    return dataclasses.replace(
        finished,
        interference=worker.watch.assess(),
        windows=tuple(worker.windows),
        waited_s=worker.waited_s,
        paused_s=worker.paused_s(),
        probes_s=worker.watch.probes_s,
    )

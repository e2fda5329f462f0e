"""Progress everyone sees: what a running cell is doing, when nobody watches a terminal.

The cell worker writes its phase ("checking", "sampling: 12 samples", "counting") to a
small file next to its result (`Beacon`, at most once a second); while it runs, the runner
prints a heartbeat line from it at least every `EVERY_S` seconds when stderr is not a
terminal (CI logs, `nohup`), so a long cell is never silent; on a terminal, rich's
progress bar shows the same.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ..stages import PAUSED_STAGE, QUIET_STAGES, TIMED_STAGES, WAITING_STAGE
from ..units import format_duration
from .quiet_link import Pauses, QuietLink, Verdict

EVERY_S = 30.0
WRITE_EVERY_S = 1.0
PROGRESS_FILE = "progress.txt"


class Beacon:
    """The worker's side: writes the cell's phase to ``path`` (atomically, throttled), and
    adds up the wall time of each named stage (`stage`), stored with the record as
    ``extra["phases_s"]`` so a slow cell says where its time went.

    With a ``link`` (`scanbench.execution.overlap.QuietLink`: the runner overlaps two workers), it
    asks for the machine before a quiet stage (`scanbench.execution.overlap.QUIET_STAGES`), says
    when a timed stage ends (`QuietLink.timed_end`) and gives the machine back before an
    untimed one; the wait is a stage of its own. Time the runner kept
    the worker stopped (``pauses``) is left out of every stage and added up apart."""

    def __init__(
        self,
        path: Path | None,
        clock: Callable[[], float] = time.monotonic,
        link: QuietLink | None = None,
        pauses: Pauses | None = None,
    ) -> None:
        self.path = path
        self.clock = clock
        self.link = link
        self.pauses = pauses or Pauses(None)
        self.holding = False
        self.timed_ended = False  # `timed_end` was said for the running sampling
        self.anew_pending = False  # `anew` was asked for: said before the next grant
        self.last = -float("inf")
        self.stages: dict[str, float] = {}
        self.current: tuple[str, float] | None = None

    def stage(self, name: str, text: str | None = None) -> None:
        """Close the running stage (its time added to its name) and start ``name``;
        ``text`` (default: the name) is written as the phase."""
        leaving = self.current[0] if self.current is not None else None
        self.stop()
        quiet = name in QUIET_STAGES
        ended = leaving in TIMED_STAGES and name not in TIMED_STAGES
        if ended:  # the closing probes now, unless `timed_end` took them already
            self.timed_end()
        if name in TIMED_STAGES:
            self.timed_ended = False
        if self.link is not None and quiet and not self.holding:
            self.current = (WAITING_STAGE, self.clock())
            self.phase("waiting: another cell is being timed")
            if self.anew_pending:  # the runner's new watch opens with this grant
                self.link.anew()
                self.anew_pending = False
            self.link.acquire()
            self.holding = True
            self.stop()
        elif self.link is not None and not quiet and self.holding:
            self.link.release()
            self.holding = False
        self.current = (name, self.clock())
        self.phase(text or name)

    def timed_end(self) -> Verdict:
        """Say that the timed samples ended, once per sampling (the runner takes its
        closing probes); the runner's verdict on them. Steady without a link or the
        machine, or when said already."""
        if self.link is None or not self.holding or self.timed_ended:
            return Verdict.STEADY
        self.timed_ended = True
        return self.link.timed_end()

    def again(self) -> None:
        """After `timed_end`: the samples are set aside and the call sampled again in
        this stage, the runner's probes opened anew."""
        if self.link is not None and self.holding and self.timed_ended:
            self.link.again()
        self.timed_ended = False

    def anew(self) -> None:
        """The worker drops its measurement so far (a reduced size's) and measures the
        cell anew: said to the runner before its next grant (the machine is given back
        in between, for the new size's prepare), so that the new samples are judged by
        probes around them alone, not by those around the dropped ones."""
        self.anew_pending = self.link is not None

    def ended(self, name: str, since: float) -> None:
        """Add a stage that ran from ``since`` (this beacon's clock) until now, before the
        beacon existed (the worker's imports), pauses left out as in `stop`."""
        self.stop()
        self.current = (name, since)
        self.stop()

    def stop(self) -> None:
        """Close the running stage, if any."""
        if self.current is not None:
            name, since = self.current
            now = self.clock()
            paused = self.pauses.between(since, now)
            self.stages[name] = self.stages.get(name, 0.0) + now - since - paused
            if paused:
                self.stages[PAUSED_STAGE] = self.stages.get(PAUSED_STAGE, 0.0) + paused
            self.current = None

    def paused_between(self, start: float, end: float) -> float:
        """Seconds of [start, end] (this beacon's clock) the runner kept this worker
        stopped: to be left out of a time measured across them."""
        return self.pauses.between(start, end)

    def phase(self, text: str, force: bool = True) -> None:
        if self.path is None:
            return
        now = self.clock()
        if not force and now - self.last < WRITE_EVERY_S:
            return
        self.last = now
        tmp = self.path.with_suffix(".tmp")
        try:
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError:  # progress is informative: never fail a cell over it
            pass

    def samples(self, count: int) -> None:
        """Called after every timed sample; writes at most once a second."""
        self.phase(f"sampling: {count} sample{'s' * (count != 1)}", force=False)


def read_phase(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip() or "starting"
    except OSError:
        return "starting"


def heartbeat_line(label: str, elapsed_s: float, phase: str) -> str:
    return f"  ... {label}: running for {format_duration(elapsed_s)}, {phase}"


@contextlib.contextmanager
def heartbeat(
    label: str,
    progress: Path,
    emit: Callable[[str], None],
    every_s: float = EVERY_S,
    clock: Callable[[], float] = time.monotonic,
    stopped: Callable[[], bool] = lambda: False,
) -> Iterator[None]:
    """Emit `heartbeat_line` every ``every_s`` seconds while the block runs; ``stopped()``
    says whether the worker is stopped right now (`scanbench.execution.overlap`: another cell is
    being timed), which its own phase cannot say."""
    stop = threading.Event()
    started = clock()

    def loop() -> None:
        while not stop.wait(every_s):
            phase = read_phase(progress)
            if stopped():
                phase += " (stopped while another cell is timed)"
            emit(heartbeat_line(label, clock() - started, phase))

    thread = threading.Thread(target=loop, name="scanbench-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()

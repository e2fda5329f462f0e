"""The worker's side of two cells at once (`scanbench.execution.overlap`): asking the runner for the
machine before a timed stage, and the pauses the runner made it take.

Every cell worker imports it (through `scanbench.execution.heartbeat`); it needs nothing but the
standard library.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import time
from pathlib import Path

QUIET_FDS = "SCANBENCH_QUIET_FDS"  # "<request write fd>,<grant read fd>" in a worker
PAUSES = "SCANBENCH_PAUSES"  # the file of a worker's pauses (JSON [[stop, continue], ...])
PAUSES_FILE = "pauses.json"
clock = time.monotonic  # one clock, the same in every process (CLOCK_MONOTONIC)
# the protocol's bytes: the worker's requests, and the runner's answer to each (to
# TIMED_END: ANSWERED, DISTURBED when its probes found the machine disturbed, BUSY when
# they did and the programs that disturbed it still run: `Verdict`)
ACQUIRE, TIMED_END, AGAIN, ANEW, RELEASE = b"q", b"t", b"a", b"n", b"r"
ANSWERED, DISTURBED, BUSY = b"g", b"d", b"b"


class Verdict(enum.StrEnum):
    """The runner's verdict on a worker's samples when they end (`QuietLink.timed_end`)."""

    STEADY = "steady"  # its probes found the machine undisturbed
    DISTURBED = "disturbed"  # they found it disturbed: sample again
    BUSY = "busy"  # disturbed by other programs that still run: sampled again, the same


VERDICTS = {ANSWERED: Verdict.STEADY, DISTURBED: Verdict.DISTURBED, BUSY: Verdict.BUSY}


class QuietLink:
    """The worker's end of the protocol: `acquire` blocks until the runner grants the
    machine (every other worker stopped, the opening probes taken); `timed_end` says its
    timed samples ended, blocks until the closing probes are taken and says whether they
    found the machine disturbed; `again` (still holding the machine) says the worker sets
    those samples aside and samples again, the runner's probes opened anew; `anew` (not
    holding it) says the worker measures its cell anew, at another size, so that what the
    runner watched so far judges nothing kept; `release` gives the machine back (the
    closing probes taken then if `timed_end` never was)."""

    def __init__(self, request_fd: int, grant_fd: int) -> None:
        self.request_fd, self.grant_fd = request_fd, grant_fd

    @classmethod
    def from_environ(cls, environ: dict[str, str] | os._Environ = os.environ) -> QuietLink | None:
        value = environ.get(QUIET_FDS)
        if not value:
            return None
        request, grant = (int(fd) for fd in value.split(","))
        return cls(request, grant)

    def acquire(self) -> None:
        self._ask(ACQUIRE)

    def timed_end(self) -> Verdict:
        """Say that this worker's timed samples ended (it keeps the machine); returns once
        the runner has taken its closing probes (`scanbench.execution.overlap.QuietWatch.close`):
        its verdict on the samples (the probe's drift, other programs' load, CPU steal)."""
        return VERDICTS[self._ask(TIMED_END, tuple(VERDICTS))]

    def again(self) -> None:
        """After `timed_end`, holding the machine: this worker sets its samples aside and
        samples again; returns once the runner has kept the verdict on them and taken its
        opening probes anew."""
        self._ask(AGAIN)

    def anew(self) -> None:
        """Not holding the machine: this worker drops its measurement so far (a reduced
        size's, `scanbench.execution.worker`) and measures the cell anew; returns once the
        runner has dropped its verdicts on it and opened a new watch, whose opening
        probes come at the next `acquire`."""
        self._ask(ANEW)

    def release(self) -> None:
        """Give the machine back; returns once the runner has taken its closing probes
        (the calibration probe must not run beside this worker's next stage)."""
        self._ask(RELEASE)

    def _ask(self, request: bytes, answers: tuple[bytes, ...] = (ANSWERED,)) -> bytes:
        """Send ``request``, block until the runner answers it, return the answer."""
        os.write(self.request_fd, request)
        answer = os.read(self.grant_fd, 1)
        if answer not in answers:
            raise RuntimeError("the runner closed its end of the quiet link")
        return answer


@dataclasses.dataclass(frozen=True)
class Pauses:
    """The worker's view of the times the runner stopped it (a file the runner rewrites
    before each SIGCONT, so every pause that ended is in it when the worker runs)."""

    path: Path | None

    @classmethod
    def from_environ(cls, environ: dict[str, str] | os._Environ = os.environ) -> Pauses:
        value = environ.get(PAUSES)
        return cls(Path(value) if value else None)

    def between(self, start: float, end: float) -> float:
        """Seconds of [start, end] (`clock` times) the worker spent stopped."""
        if self.path is None:
            return 0.0
        try:
            spans = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # no pause yet
            return 0.0
        return paused_within(spans, start, end)


def paused_within(
    spans: list[tuple[float, float]] | list[list[float]], start: float, end: float
) -> float:
    """The total overlap of the ``spans`` with [start, end] (pure)."""
    return sum(max(0.0, min(end, b) - max(start, a)) for a, b in spans)

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

from harness.units import format_duration

EVERY_S = 30.0
WRITE_EVERY_S = 1.0
PROGRESS_FILE = "progress.txt"


class Beacon:
    """The worker's side: writes the cell's phase to ``path`` (atomically, throttled), and
    adds up the wall time of each named stage (`stage`), stored with the record as
    ``extra["phases_s"]`` so a slow cell says where its time went."""

    def __init__(self, path: Path | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.clock = clock
        self.last = -float("inf")
        self.stages: dict[str, float] = {}
        self.current: tuple[str, float] | None = None

    def stage(self, name: str, text: str | None = None) -> None:
        """Close the running stage (its time added to its name) and start ``name``;
        ``text`` (default: the name) is written as the phase."""
        self.stop()
        self.current = (name, self.clock())
        self.phase(text or name)

    def stop(self) -> None:
        """Close the running stage, if any."""
        if self.current is not None:
            name, since = self.current
            self.stages[name] = self.stages.get(name, 0.0) + self.clock() - since
            self.current = None

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
) -> Iterator[None]:
    """Emit `heartbeat_line` every ``every_s`` seconds while the block runs."""
    stop = threading.Event()
    started = clock()

    def loop() -> None:
        while not stop.wait(every_s):
            emit(heartbeat_line(label, clock() - started, read_phase(progress)))

    thread = threading.Thread(target=loop, name="scanbench-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()

"""SIGINT and SIGTERM as an exception, so a run stops cleanly and keeps what it finished."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ..api import HarnessError


class Interrupted(HarnessError):
    """The user (Ctrl-C: SIGINT) or the system (SIGTERM) stopped the run."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")

    @property
    def exit_code(self) -> int:
        """130 for SIGINT, 143 for SIGTERM (128 + the signal number, as shells do)."""
        return 128 + self.signum


_pending: list[int] = []  # signals received in the block, until raised where it is safe


@contextmanager
def signals_raise() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise `Interrupted` in the main thread.

    A handler's exception can be swallowed: a signal that lands while Python runs a
    callback whose exceptions are ignored (measured: ``logging``'s after-fork hook while
    ``subprocess.Popen`` starts a worker, "Exception ignored in: _releaseLock") would be
    lost, and the run would go on. So the signal is also kept, and `raise_if_interrupted`
    raises it at the next safe point (right after each worker starts)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        _pending.append(signum)
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        _pending.clear()


def raise_if_interrupted() -> None:
    """Raise `Interrupted` for a signal received in `signals_raise` whose exception was
    swallowed (or not raised yet); nothing otherwise."""
    if _pending:
        raise Interrupted(_pending[-1])

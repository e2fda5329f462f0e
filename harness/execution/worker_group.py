"""A worker's own process group and its stderr kept bounded.

- **The group.** Every worker leads a process group of its own (``setpgid`` in the fork
  server's child, ``process_group=0`` for a spawned one), so whatever a cell starts (a
  ``multiprocessing`` pool, a compiler, a shell) is in it. Stopping a worker signals the
  group while its leader is still unreaped (so the group's id cannot name anyone else),
  and once the leader has exited, what is left of the group is killed: a cell's own
  processes never outlive its worker. A worker that moved itself to another session
  (``setsid``) is out of reach, as it is of a terminal's Ctrl-C.
- **Its stderr, bounded.** A worker's stderr is read as it comes and only its last
  `KEPT_BYTES` are held; the total is counted, and a cut is said at the top of what is
  kept. A worker printing gigabytes costs the run no memory.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import threading

KEPT_BYTES = 256 * 1024  # of a worker's stderr: its tail, where a traceback ends
CHUNK_BYTES = 65536
CUT_PREFIX = "(stderr: "  # the first line of a tail that was cut


def signal_group(leader: int, signum: int) -> None:
    """``signum`` to every process in ``leader``'s group; nothing if the group is gone."""
    if leader > 0:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(leader, signum)


def end_leftovers(leader: int) -> None:
    """SIGKILL what is left of an exited worker's group (its own children). The group's
    id is not given to a new process while any member lives, so the signal reaches only
    the worker's leftovers; an empty group is gone and nothing is signalled."""
    for signum in (signal.SIGCONT, signal.SIGKILL):  # a stopped leftover dies all the same
        signal_group(leader, signum)


class StderrTail:
    """A worker's stderr, read from ``stream`` by a daemon thread: the last `KEPT_BYTES`
    kept, every byte counted."""

    def __init__(self, stream, name: str = "scanbench-worker-stderr") -> None:
        self.total = 0
        self._chunks: collections.deque[bytes] = collections.deque()
        self._kept = 0
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, args=(stream,), name=name, daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:
        read = getattr(stream, "read1", stream.read)  # what has come, not a full chunk
        with contextlib.suppress(OSError, ValueError), stream:
            while chunk := read(CHUNK_BYTES):
                self.add(chunk)

    def add(self, chunk: bytes) -> None:
        with self._lock:
            self.total += len(chunk)
            self._chunks.append(chunk)
            self._kept += len(chunk)
            while self._kept - len(self._chunks[0]) >= KEPT_BYTES:
                self._kept -= len(self._chunks.popleft())

    def text(self) -> str:
        """What was kept, decoded; a cut starts at a line and is said first."""
        with self._lock:
            data, total = b"".join(self._chunks), self.total
        if len(data) > KEPT_BYTES:
            data = data[-KEPT_BYTES:]
        if total > len(data):
            newline = data.find(b"\n")
            data = data[newline + 1 :] if 0 <= newline < len(data) - 1 else data
            head = f"{CUT_PREFIX}{total:,} bytes; the first {total - len(data):,} left out)\n"
            return head + data.decode(errors="replace")
        return data.decode(errors="replace")

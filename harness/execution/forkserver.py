"""Workers forked from a process that has imported JAX already: a fresh process per cell
without paying JAX's import in every one.

A worker is ``python -m scanbench.execution.worker ...``, and most of its start-up is the
import of JAX and NumPy (about 0.8 s of CPU on a 2-core VM, against 0.03 s for the bare
interpreter: performance log, 2026-12-02). A *fork server* is one process per runner
(per interpreter and environment) that imports the worker's modules once, then forks a
child for each worker the runner starts, what ``multiprocessing``'s ``forkserver`` does for
its workers. The rules that keep a forked worker what a spawned one is:

- **It has run nothing.** The server imports modules and never starts a JAX backend
  (``jax.devices()``), compiles, or runs a cell; each child is forked from that state, so
  no cell sees another's caches, compiled programs or allocations. JAX warns at a fork
  only after a backend has started, and the server checks that none has before it forks.
- **Its environment is the worker's.** The child takes the runner's environment for that
  worker, its working directory and its file descriptors (stderr, the quiet link's
  pipes) at their numbers. What the server's imports read of the environment must be the
  same: a worker whose environment differs outside `AFTER_IMPORT` (read only once the
  worker runs: XLA's flags, Numba's settings, scanbench's own) gets a server of its own.
- **Nothing is shared by writing.** The server freezes its objects for the garbage
  collector before it forks (``gc.freeze``, as the Python docs advise for a pre-fork
  server), so a child's collections neither scan nor copy the server's pages.
- **It dies with the run.** The server ends when the runner's end of their socket closes
  or the runner dies (it is re-parented), stopping its workers first (a SIGCONT, then
  SIGTERM). It asks for no death signal: ``prctl`` ties one to the runner *thread* that
  started it. Each child asks for its own death signal when the server dies
  (`scanbench.execution.parent_watch`).
- **A fork nobody waits for does not run on.** A start that gives up (a Ctrl-C, no
  answer in time) leaves its request abandoned: its child is stopped when its pid
  arrives, and a server that did not answer is not used again.

The runner sees a `Forked` worker with the part of `subprocess.Popen` it uses (``pid``,
``poll``, ``communicate``, ``terminate``, ``kill``, ``returncode``). Anything else, or a
server that cannot start (an interpreter whose scanbench has no fork server, a platform
without ``fork``), starts the worker with ``subprocess`` as before. ``SCANBENCH_FORKSERVER
=off`` turns the fork server off.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence

from .forking import SERVER_FD, receive, send
from .parent_watch import PARENT_PID
from .worker_group import StderrTail, end_leftovers, signal_group

SWITCH = "SCANBENCH_FORKSERVER"  # "off": every worker is spawned
MODULE = "scanbench.execution.forking"  # the server's process
# read by a worker only once it runs (never by the server's imports): they may differ
AFTER_IMPORT = ("XLA_FLAGS",)
AFTER_IMPORT_PREFIXES = ("SCANBENCH_", "NUMBA_")
START_TIMEOUT_S = 120.0  # the server's imports, on a loaded machine
MAX_SERVERS = 4  # servers kept per runner (one per interpreter and environment)
LOST = 255  # the return code of a worker whose server ended first (its status is lost)
REPLY_TIMEOUT_S = 60.0  # a fork takes milliseconds: past this the server is not used again


class Unavailable(Exception):
    """The fork server cannot start this worker: start it with ``subprocess``."""


def import_environment(environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The part of a worker's environment that the server's imports may read."""
    return tuple(
        sorted(
            (key, value)
            for key, value in environ.items()
            if key not in AFTER_IMPORT and not key.startswith(AFTER_IMPORT_PREFIXES)
        )
    )


def module_command(command: Sequence[str]) -> tuple[str, str, list[str]] | None:
    """``(python, module, args)`` for ``python -m module args``, else None."""
    if len(command) >= 3 and command[1] == "-m":
        return command[0], command[2], list(command[3:])
    return None


def enabled(environ: Mapping[str, str] = os.environ) -> bool:
    return (
        environ.get(SWITCH, "").lower() != "off"
        and sys.platform.startswith("linux")
        and hasattr(os, "fork")
    )


# --- the runner's side -------------------------------------------------------------------


class Forked:
    """A worker forked by a `Server`: what the runner uses of `subprocess.Popen`. Its
    stderr is read as it comes (never blocking the worker on a full pipe); its exit
    status comes from the server, which is its parent."""

    def __init__(self, args: list[str], pid: int, stderr_fd: int) -> None:
        self.args = args
        self.pid = pid
        self.returncode: int | None = None
        self._exited = threading.Event()
        stream = open(stderr_fd, "rb", buffering=0)  # noqa: SIM115 (closed by its reader)
        self._stderr = StderrTail(stream, "scanbench-forked-stderr")
        self._reader = self._stderr.thread

    def lost(self, why: str) -> None:
        """Its server ended first: the exit status is `LOST`, and its stderr says why."""
        self._stderr.add(f"\nscanbench: {why}\n".encode())
        self.exited(LOST)

    def exited(self, returncode: int) -> None:
        self.returncode = returncode
        self._exited.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._exited.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode  # type: ignore[return-value]

    def communicate(self, timeout: float | None = None) -> tuple[None, str]:
        """``(None, stderr)`` once the worker has exited and its stderr closed; raises
        `subprocess.TimeoutExpired` after ``timeout`` seconds (and may be called again)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self.wait(timeout)
        end_leftovers(self.pid)  # its own children hold its stderr open no longer
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        self._reader.join(left)
        if self._reader.is_alive():  # a descendant in another session holds its stderr
            raise subprocess.TimeoutExpired(self.args, timeout)
        return None, self._stderr.text()

    def send_signal(self, signum: int) -> None:
        """``signum`` to the worker's process group (its own children with it), only
        while the worker is unreaped: once reaped, its pid may be another process's."""
        if self.returncode is None:
            signal_group(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Server:
    """The runner's handle on one fork server: started at once, waits for its imports."""

    def __init__(self, python: str, environ: Mapping[str, str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = {**environ, SERVER_FD: str(theirs.fileno()), PARENT_PID: str(os.getpid())}
        try:
            self.process = subprocess.Popen(  # noqa: S603 (this interpreter's own module)
                [python, "-m", MODULE],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=env,
                pass_fds=(theirs.fileno(),),
            )
        finally:
            theirs.close()
        self.python = python
        self.owner = os.getpid()
        self.starting = 0  # starts in progress (`forked`, under its registry lock)
        self._sock = ours
        self._lock = threading.Lock()  # one request at a time
        self._replied = threading.Condition()  # guards everything below
        self._next_id = 0
        self._replies: dict[int, dict] = {}
        self._abandoned: set[int] = set()  # requests whose `start` gave up waiting
        self._workers: dict[int, Forked] = {}
        self._early: dict[int, int] = {}  # exits heard before their `Forked` was made
        self._ended = False
        self._broken = False  # it did not answer in time: not used again
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=5)
        ours.settimeout(START_TIMEOUT_S)
        try:
            ready, _ = receive(ours)
        except OSError:
            ready = None
        ours.settimeout(None)
        if not ready or not ready.get("ready"):
            self.close()
            stderr = self.process.communicate(timeout=30)[1] or b""
            tail = stderr.decode(errors="replace").strip().splitlines()[-1:] or ["(no stderr)"]
            raise Unavailable(f"the fork server did not start: {tail[0]}")
        self.pid = int(ready["pid"])
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        threading.Thread(target=self._listen, name="scanbench-forkserver", daemon=True).start()

    def _drain_stderr(self) -> None:
        """Keep the server's last lines: a worker it leaves behind says them."""
        with contextlib.suppress(OSError, ValueError):
            for line in self.process.stderr:  # type: ignore[union-attr]
                self._stderr_tail.append(line.decode(errors="replace").rstrip())

    def _listen(self) -> None:
        """Replies go to the waiting `start`; exits to their workers."""
        while True:
            try:
                message, _ = receive(self._sock)
            except OSError:
                message = None
            if message is None:
                break
            if "exit" in message:
                pid, returncode = int(message["exit"]), int(message["returncode"])
                with self._replied:  # its `start` may not have its `Forked` yet
                    worker = self._workers.pop(pid, None)
                    if worker is None:
                        self._early[pid] = returncode
                if worker is not None:
                    worker.exited(returncode)
                continue
            with self._replied:
                request = int(message["id"])
                if request not in self._abandoned:
                    self._replies[request] = message
                    self._replied.notify_all()
                    continue
                self._abandoned.discard(request)
            if "pid" in message:  # a worker nobody waits for: it must not run on
                _stop_abandoned(int(message["pid"]))
        # the server ended: its children got their death signal; their status is lost
        with self._replied:
            self._ended = True
            self._replied.notify_all()
            lost, self._workers = list(self._workers.values()), {}
        for worker in lost:
            worker.lost(self._why_lost())

    def _why_lost(self) -> str:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        said = "; ".join(line for line in self._stderr_tail if line) or "no stderr"
        return (
            f"the fork server ended before this worker (return code "
            f"{self.process.returncode}; {said}): the worker's own exit status is unknown"
        )

    def start(
        self, module: str, args: list[str], environ: Mapping[str, str], pass_fds: Sequence[int]
    ) -> Forked:
        """Fork a worker running ``python -m module args`` with ``environ`` and
        ``pass_fds`` at their numbers; its stdin and stdout are /dev/null."""
        stderr_r, stderr_w = os.pipe()
        try:
            with self._lock:
                with self._replied:
                    request, self._next_id = self._next_id, self._next_id + 1
                message = {
                    "id": request,
                    "module": module,
                    "args": args,
                    "env": dict(environ),
                    "cwd": os.getcwd(),
                    "fds": [2, *pass_fds],
                }
                try:
                    send(self._sock, message, [stderr_w, *pass_fds])
                except OSError as error:
                    self._broken = True
                    raise Unavailable(f"the fork server is gone: {error}") from error
                reply = self._reply(request)
                worker = Forked([self.python, "-m", module, *args], int(reply["pid"]), stderr_r)
                stderr_r = -1  # its reader's now
                with self._replied:
                    early = self._early.pop(worker.pid, None)
                    ended = self._ended
                    if early is None and not ended:
                        self._workers[worker.pid] = worker
                if early is not None:  # it ended before its `Forked` was made
                    worker.exited(early)
                elif ended:  # the server ended before it was registered
                    worker.lost(self._why_lost())
                return worker
        except BaseException:
            if stderr_r >= 0:
                os.close(stderr_r)
            raise
        finally:
            os.close(stderr_w)

    def _reply(self, request: int) -> dict:
        """The server's answer to ``request``: its child's pid. A `start` that stops
        waiting (a timeout, a Ctrl-C) leaves the request abandoned: its child, if one
        was forked, is stopped, and the server is not used again after a timeout."""
        with self._replied:
            try:
                answered = self._replied.wait_for(
                    lambda: request in self._replies or self._ended, REPLY_TIMEOUT_S
                )
                reply = self._replies.pop(request, None)
                if reply is None:
                    self._broken = not answered or self._broken
                    raise Unavailable(
                        "the fork server did not answer"
                        if not answered
                        else "the fork server ended"
                    )
            except BaseException:
                if request not in self._replies:
                    self._abandoned.add(request)
                else:
                    _stop_abandoned(int(self._replies.pop(request).get("pid", 0)))
                raise
        if "pid" not in reply:
            raise Unavailable(f"the fork server could not fork: {reply.get('error')}")
        return reply

    def busy(self) -> bool:
        """Whether a worker it forked is still running, or one is being started (ending
        it would stop that one)."""
        with self._replied:
            return bool(self._workers) or self.starting > 0

    def alive(self) -> bool:
        return not (self._ended or self._broken) and self.process.poll() is None

    def close(self) -> None:
        """End the server (it stops any child still running) and reap it."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_servers: dict[tuple, Server] = {}  # least recently used first
_retired: list[Server] = []  # replaced while a worker of theirs ran: ended at exit
_unavailable: set[tuple] = set()
_registry = threading.Lock()


def forked(
    command: Sequence[str], environ: Mapping[str, str], pass_fds: Sequence[int] = ()
) -> Forked | None:
    """The worker ``command`` forked by this runner's server for its interpreter and
    environment (started on first use), or None: start it with ``subprocess``."""
    parsed = module_command(command)
    if parsed is None or not enabled(environ):
        return None
    python, module, args = parsed
    # a process forked from this one (multiprocessing) must not use this one's servers
    key = (os.getpid(), python, import_environment(environ))
    with _registry:
        if key in _unavailable:
            return None
        server = _servers.pop(key, None)
        if server is not None and not server.alive():
            _end(server)
            server = None
        if server is None:
            try:
                server = Server(python, dict(key[2]))
            except (Unavailable, OSError):
                _unavailable.add(key)
                return None
            idle = [k for k, s in _servers.items() if not s.busy()]
            for old in idle[: max(0, len(_servers) + 1 - MAX_SERVERS)]:
                _servers.pop(old).close()
        _servers[key] = server  # the most recently used, last
        server.starting += 1
    try:
        return server.start(module, args, environ, pass_fds)
    except Unavailable:
        return None
    finally:
        with _registry:
            server.starting -= 1


def _end(server: Server) -> None:
    """End a server now, or at exit if a worker of its still runs."""
    if server.busy():
        _retired.append(server)
    else:
        server.close()


@atexit.register
def close_all() -> None:
    """End this process's servers (never those of the process it was forked from)."""
    with _registry:
        for key in [k for k in _servers if k[0] == os.getpid()]:
            _servers.pop(key).close()
        for server in [s for s in _retired if s.owner == os.getpid()]:
            _retired.remove(server)
            server.close()


def _stop_abandoned(pid: int) -> None:
    """A forked worker whose `start` was given up: SIGTERM, after a SIGCONT."""
    for signum in (signal.SIGCONT, signal.SIGTERM):
        signal_group(pid, signum)

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
- **It dies with the run.** The server asks for SIGTERM when the runner dies and passes
  it on (a SIGCONT first, for a stopped worker); each child asks for its own death signal
  when the server dies (`scanbench.execution.parent_watch`).

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
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence

from .parent_watch import DEATH_SIGNAL, PARENT_PID, exit_with_parent

SWITCH = "SCANBENCH_FORKSERVER"  # "off": every worker is spawned
SERVER_FD = "SCANBENCH_FORKSERVER_FD"  # the server's end of its socket
MODULE = "scanbench.execution.forkserver"
PRELOAD = ("scanbench.execution.worker",)  # what a worker imports: JAX, NumPy, the engine
# read by a worker only once it runs (never by the server's imports): they may differ
AFTER_IMPORT = ("XLA_FLAGS",)
AFTER_IMPORT_PREFIXES = ("SCANBENCH_", "NUMBA_")
START_TIMEOUT_S = 300.0  # the server's imports, on a loaded machine
MAX_SERVERS = 4  # servers kept per runner (one per interpreter and environment)
LENGTH = struct.Struct("!I")
LOST = 255  # the return code of a worker whose server ended first (its status is lost)


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


# --- the wire: a length, then JSON; file descriptors ride along (SCM_RIGHTS) ------------


def _send(sock: socket.socket, message: dict, fds: Sequence[int] = ()) -> None:
    data = json.dumps(message).encode()
    payload = LENGTH.pack(len(data)) + data
    if fds:
        socket.send_fds(sock, [payload], list(fds))
    else:
        sock.sendall(payload)


def _receive(sock: socket.socket) -> tuple[dict | None, list[int]]:
    """One message and the descriptors it carried; (None, []) at the end of the stream."""
    head, fds, _, _ = socket.recv_fds(sock, LENGTH.size, 64)
    if not head:
        return None, []
    while len(head) < LENGTH.size:
        more = sock.recv(LENGTH.size - len(head))
        if not more:
            return None, fds
        head += more
    (size,) = LENGTH.unpack(head)
    data = b""
    while len(data) < size:
        more = sock.recv(size - len(data))
        if not more:
            return None, fds
        data += more
    return json.loads(data), fds


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
        self._chunks: list[bytes] = []
        self._reader = threading.Thread(
            target=self._read, args=(stderr_fd,), name="scanbench-forked-stderr", daemon=True
        )
        self._reader.start()

    def _read(self, fd: int) -> None:
        with open(fd, "rb", buffering=0, closefd=True) as stream:
            while chunk := stream.read(65536):
                self._chunks.append(chunk)

    def lost(self, why: str) -> None:
        """Its server ended first: the exit status is `LOST`, and its stderr says why."""
        self._chunks.append(f"\nscanbench: {why}\n".encode())
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
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        self._reader.join(left)
        if self._reader.is_alive():  # a descendant of the worker still holds its stderr
            raise subprocess.TimeoutExpired(self.args, timeout)
        return None, b"".join(self._chunks).decode(errors="replace")

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:  # once reaped, the pid may be another process's
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Server:
    """The runner's handle on one fork server: started at once, waits for its imports."""

    def __init__(self, python: str, environ: Mapping[str, str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = {
            **environ,
            SERVER_FD: str(theirs.fileno()),
            PARENT_PID: str(os.getpid()),
            DEATH_SIGNAL: str(int(signal.SIGTERM)),
        }
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
        self._sock = ours
        self._lock = threading.Lock()  # one request at a time
        self._replies: list[dict] = []
        self._replied = threading.Condition()
        self.python = python
        self._workers: dict[int, Forked] = {}
        self._early: dict[int, int] = {}  # exits heard before their `Forked` was made
        self._ended = False
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=5)
        ours.settimeout(START_TIMEOUT_S)
        try:
            ready, _ = _receive(ours)
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
                message, _ = _receive(self._sock)
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
            else:
                with self._replied:
                    self._replies.append(message)
                    self._replied.notify_all()
        # the server ended: its children got their death signal; their status is lost
        with self._replied:
            self._ended = True
            self._replied.notify_all()
        with self._replied:
            lost, self._workers = list(self._workers.values()), {}
        if lost:
            self.process.wait()
        said = "; ".join(line for line in self._stderr_tail if line) or "no stderr"
        for worker in lost:
            worker.lost(
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
                request = {
                    "module": module,
                    "args": args,
                    "env": dict(environ),
                    "cwd": os.getcwd(),
                    "fds": [2, *pass_fds],
                }
                try:
                    _send(self._sock, request, [stderr_w, *pass_fds])
                except OSError as error:
                    raise Unavailable(f"the fork server is gone: {error}") from error
                with self._replied:
                    self._replied.wait_for(lambda: self._replies or self._ended)
                    if not self._replies:
                        raise Unavailable("the fork server ended")
                    reply = self._replies.pop(0)
                if "pid" not in reply:
                    raise Unavailable(f"the fork server could not fork: {reply.get('error')}")
                worker = Forked([self.python, "-m", module, *args], int(reply["pid"]), stderr_r)
                stderr_r = -1  # its reader's now
                with self._replied:
                    early = self._early.pop(worker.pid, None)
                    if early is None:
                        self._workers[worker.pid] = worker
                if early is not None:  # it ended before its `Forked` was made
                    worker.exited(early)
                return worker
        except BaseException:
            if stderr_r >= 0:
                os.close(stderr_r)
            raise
        finally:
            os.close(stderr_w)

    def busy(self) -> bool:
        """Whether a worker it forked is still running (ending it would stop that one)."""
        with self._replied:
            return bool(self._workers)

    def alive(self) -> bool:
        return not self._ended and self.process.poll() is None

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


_servers: dict[tuple, Server] = {}
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
        server = _servers.get(key)
        if server is not None and not server.alive():
            del _servers[key]
            server = None
        if server is None:
            try:
                server = Server(python, dict(key[2]))
            except (Unavailable, OSError):
                _unavailable.add(key)
                return None
            idle = [k for k, s in _servers.items() if not s.busy()]  # oldest first
            for old in idle[: max(0, len(_servers) + 1 - MAX_SERVERS)]:
                _servers.pop(old).close()
            _servers[key] = server
    try:
        return server.start(module, args, environ, pass_fds)
    except Unavailable:
        return None


@atexit.register
def close_all() -> None:
    """End this process's servers (never those of the process it was forked from)."""
    with _registry:
        for key in [k for k in _servers if k[0] == os.getpid()]:
            _servers.pop(key).close()


# --- the server's side -------------------------------------------------------------------


def _serve(sock: socket.socket) -> dict | None:
    """Fork a child per request; report each child's exit. Returns, in a child, its
    request (the caller runs it); in the server, None when the runner has gone."""
    children: set[int] = set()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)

    def stop_children(*_: object) -> None:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)  # a stopped worker takes its SIGTERM
                os.kill(pid, signal.SIGTERM)
        os._exit(143)

    signal.signal(signal.SIGTERM, stop_children)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the runner's to handle

    def reap() -> None:
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            children.discard(pid)
            _send(sock, {"exit": pid, "returncode": os.waitstatus_to_exitcode(status)})

    while True:
        readable, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)
            reap()
        if sock not in readable:
            continue
        request, fds = _receive(sock)
        if request is None:  # the runner closed its end: stop what is left, then leave
            if children:
                stop_children()
            return None
        try:
            pid = _fork()
        except OSError as error:
            for fd in fds:
                os.close(fd)
            _send(sock, {"error": str(error)})
            continue
        if pid == 0:
            signal.set_wakeup_fd(-1)
            for fd in (wake_r, wake_w):
                os.close(fd)
            sock.close()
            return {**request, "received": fds}
        for fd in fds:
            os.close(fd)
        children.add(pid)
        _send(sock, {"pid": pid})
        reap()


def _fork() -> int:
    import warnings

    with warnings.catch_warnings():  # Python 3.12 warns of the BLAS pool's idle thread
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


def _place(received: Sequence[int], targets: Sequence[int]) -> None:
    """Put each received descriptor at its target number; close every other one above
    stderr, as `subprocess` does (``close_fds``)."""
    import fcntl

    floor = max([*targets, *received, 2]) + 1
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, floor) for fd in received]
    for fd in received:
        os.close(fd)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    if null > 2:
        os.close(null)
    for fd, target in zip(moved, targets, strict=True):
        os.dup2(fd, target)  # inheritable, as subprocess's pass_fds are
    keep = sorted({0, 1, 2, *targets})
    for low, high in zip(keep, [*keep[1:], os.sysconf("SC_OPEN_MAX")], strict=True):
        os.closerange(low + 1, high)


def _become(request: dict) -> None:
    """In a child: take the worker's descriptors, environment and directory, then run its
    module as ``python -m`` would; never returns."""
    import runpy
    import traceback

    code = 1
    try:
        _place(request["received"], request["fds"])
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ[PARENT_PID] = str(os.getppid())  # its parent is this server
        os.chdir(request["cwd"])
        sys.path[0] = request["cwd"]  # what ``python -m`` puts first
        if "numpy.random" in sys.modules:  # spawned workers draw their own seed
            sys.modules["numpy.random"].seed()
        sys.argv = [MODULE, *request["args"]]
        # ``python -m`` runs a module not imported yet: its preloaded copy is forgotten
        sys.modules.pop(request["module"], None)
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if not isinstance(exit_.code, int | None):
            print(exit_.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def main() -> None:
    exit_with_parent([])  # SIGTERM when the runner dies (its handler is set in _serve)
    sock = socket.socket(fileno=int(os.environ.pop(SERVER_FD)))
    import gc
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    from jax._src import xla_bridge

    if getattr(xla_bridge, "_backends", None):  # never fork a process running JAX
        raise SystemExit("the fork server's imports started a JAX backend")
    gc.collect()
    gc.freeze()
    _send(sock, {"ready": True, "pid": os.getpid()})
    request = _serve(sock)
    if request is not None:
        _become(request)


if __name__ == "__main__":
    main()

"""The fork server's own process (`scanbench.execution.forkserver` is the runner's side):
it imports what a worker imports, then forks one child per request and reports each
child's exit. Run as ``python -m scanbench.execution.forking`` by `forkserver.Server`.

The wire between the two is a length, then JSON, on a socket pair; file descriptors ride
along (``SCM_RIGHTS``).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import struct
import sys
from collections.abc import Sequence

from .parent_watch import PARENT_PID

SERVER_FD = "SCANBENCH_FORKSERVER_FD"  # the server's end of its socket
PRELOAD = ("scanbench.execution.worker",)  # what a worker imports: JAX, NumPy, the engine
LENGTH = struct.Struct("!I")
PARENT_CHECK_S = 1.0  # how often the server looks for its runner
BLOCKED = {signal.SIGTERM, signal.SIGCHLD}
MODULE_ARGV0 = "scanbench.execution.forking"


def send(sock: socket.socket, message: dict, fds: Sequence[int] = ()) -> None:
    data = json.dumps(message).encode()
    payload = LENGTH.pack(len(data)) + data
    if fds:
        socket.send_fds(sock, [payload], list(fds))
    else:
        sock.sendall(payload)


def receive(sock: socket.socket) -> tuple[dict | None, list[int]]:
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


def _serve(sock: socket.socket, runner: int) -> dict:
    """Fork a child per request; report each child's exit. Returns only in a child, its
    request (the caller runs it); the server itself exits once the runner has gone (its
    end of the socket closed, or this process re-parented: the runner died)."""
    children: set[int] = set()
    server = os.getpid()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)

    def stop_children(*_: object) -> None:
        for pid in children:  # each leads its own group: its children go with it
            for signum in (signal.SIGCONT, signal.SIGTERM):  # a stopped worker takes it
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signum)
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
            with contextlib.suppress(OSError):  # the runner may be gone
                send(sock, {"exit": pid, "returncode": os.waitstatus_to_exitcode(status)})

    while True:
        readable, _, _ = select.select([sock, wake_r], [], [], PARENT_CHECK_S)
        if os.getppid() != runner:  # the runner died: its workers go with it
            stop_children()
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)
            reap()
        if sock not in readable:
            continue
        try:
            request, fds = receive(sock)
        except OSError:
            request, fds = None, []
        if request is None:  # the runner closed its end: stop what is left, then leave
            stop_children()
        # no signal between the fork and the child's pid kept (or the child's own set-up)
        signal.pthread_sigmask(signal.SIG_BLOCK, BLOCKED)
        try:
            pid = _fork()
        except OSError as error:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, BLOCKED)
            for fd in fds:
                os.close(fd)
            send(sock, {"id": request["id"], "error": str(error)})
            continue
        if pid == 0:
            os.setpgid(0, 0)  # a group of its own: what it starts is stopped with it
            signal.set_wakeup_fd(-1)
            for fd in (wake_r, wake_w):
                os.close(fd)
            sock.close()
            for signum in (signal.SIGTERM, signal.SIGCHLD):
                signal.signal(signum, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            return {**request, "received": fds, "server": server}
        children.add(pid)
        with contextlib.suppress(OSError):  # as the child does: whichever runs first
            os.setpgid(pid, pid)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, BLOCKED)
        for fd in fds:
            os.close(fd)
        send(sock, {"id": request["id"], "pid": pid})
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
    import importlib
    import runpy

    code = 1
    try:
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ[PARENT_PID] = str(request["server"])  # its parent is this server
        signal.pthread_sigmask(signal.SIG_UNBLOCK, BLOCKED)
        if os.getppid() != request["server"]:  # the server died before this child ran
            os._exit(143)
        _place(request["received"], request["fds"])
        os.chdir(request["cwd"])
        if not getattr(sys.flags, "safe_path", False):
            sys.path[0] = request["cwd"]  # what ``python -m`` puts first
        importlib.invalidate_caches()  # files written since the server's imports
        if "numpy.random" in sys.modules:  # spawned workers draw their own seed
            sys.modules["numpy.random"].seed()
        sys.argv = [MODULE_ARGV0, *request["args"]]
        # ``python -m`` runs a module not imported yet: its preloaded copy is forgotten
        sys.modules.pop(request["module"], None)
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if not isinstance(exit_.code, int | None):
            print(exit_.code, file=sys.stderr)
    except KeyboardInterrupt:  # as the interpreter ends on one: by SIGINT itself
        sys.excepthook(*sys.exc_info())
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        sys.excepthook(*sys.exc_info())
    finally:
        _flush()
        os._exit(code)


def _flush() -> None:
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()


def main() -> None:
    """The server: its imports, then its requests. It has no death signal of its own
    (``prctl`` ties one to the runner *thread* that started it, and a run's threads come
    and go): it ends when the runner's end of the socket closes or the runner dies."""
    runner = int(os.environ.pop(PARENT_PID))
    sock = socket.socket(fileno=int(os.environ.pop(SERVER_FD)))
    if os.getppid() != runner:
        os._exit(143)
    import gc
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():  # never fork a process running JAX
        raise SystemExit("the fork server's imports started a JAX backend")
    gc.collect()
    gc.freeze()
    send(sock, {"ready": True, "pid": os.getpid()})
    _become(_serve(sock, runner))


if __name__ == "__main__":
    main()

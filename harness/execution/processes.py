"""Worker processes: started so that they never outlive the run, stopped on every exit
path, and their failures described by name.

- A worker dies with the run (`scanbench.execution.parent_watch`): it asks the kernel
  itself, first thing after its interpreter starts. Nothing runs between fork and exec,
  so `subprocess` takes its fast, thread-safe spawn path (``vfork``/``posix_spawn``; no
  ``preexec_fn``, which forks, runs Python in the child of a threaded parent and, with
  ``ctypes.util.find_library``, ran ``ldconfig`` there).
- A ``python -m`` worker is forked by the run's fork server, which has
  imported JAX already (`scanbench.execution.forkserver`); any other command, or when
  the server cannot, is spawned.
- A timeout, a Ctrl-C or any exception in the parent kills the worker and waits for it.
  The worker leads its own process group, and the group is what is stopped: a cell's own
  processes end with it (`scanbench.execution.worker_group`, which also keeps only the
  tail of a worker's stderr).
- A crash is described as "killed by SIGSEGV" (a negative return code by its signal's
  name) plus the last lines of the worker's stderr.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import time
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext, suppress
from typing import Any

from .forkserver import Forked, forked
from .interrupts import raise_if_interrupted
from .parent_watch import DEATH_SIGNAL, PARENT_PID
from .worker_group import CUT_PREFIX, StderrTail, end_leftovers, signal_group

STDERR_LINES = 20  # last lines of a failed worker's stderr kept in its message
NOT_OURS = (
    "by another process, not by scanbench: on Linux most often the kernel's out-of-memory "
    "killer (`dmesg` names the process; see Troubleshooting, 'killed by SIGKILL')"
)


def exit_description(returncode: int) -> str:
    """ "exited with code 3" or "killed by SIGSEGV (signal 11)"."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "an unknown signal"
        return f"killed by {name} (signal {-returncode})"
    return f"exited with code {returncode}"


def stderr_tail(stderr: str, lines: int = STDERR_LINES) -> str:
    """The last ``lines`` non-empty lines, after the line that says how much of a long
    stderr was left out (`StderrTail.text`) when there is one."""
    kept = [line for line in (stderr or "").strip().splitlines() if line.strip()]
    cut = kept[:1] if len(kept) > lines and kept[0].startswith(CUT_PREFIX) else []
    return "\n".join(cut + kept[-lines:])


@dataclasses.dataclass(frozen=True)
class Finished:
    """How a worker ended: its return code (None on timeout) and stderr."""

    returncode: int | None
    stderr: str
    timed_out: bool = False
    # with a `scanbench.execution.overlap.Machine`: the interference over its quiet stages, how long
    # it waited to start and was stopped, and the runner's probing time
    interference: dict[str, Any] | None = None
    # the verdicts on the samplings it set aside and took again (`Worker.windows`)
    windows: tuple[dict[str, Any], ...] = ()
    waited_s: float = 0.0
    paused_s: float = 0.0
    probes_s: float = 0.0

    def failure(self, timeout_s: float) -> str | None:
        """A one-paragraph description of a failure, None for a clean exit."""
        if self.timed_out:
            return f"timeout: the worker did not finish within {timeout_s:g} s"
        if self.returncode == 0:
            return None
        tail = stderr_tail(self.stderr)
        message = f"worker {exit_description(self.returncode)}"
        if self.returncode == -signal.SIGKILL:  # scanbench's own kill is a timeout, above
            message += f" {NOT_OURS}"
        return f"{message}; its stderr ends with:\n{tail}" if tail else message


def run_worker_process(
    command: list[str],
    environ: dict[str, str],
    timeout_s: float,
    while_running: Callable[[int], AbstractContextManager] | None = None,
) -> Finished:
    """Run ``command`` to completion (or its timeout); the child dies with this process
    and is killed if anything (a timeout, Ctrl-C, SIGTERM) stops the wait.

    Args:
        while_running: ``while_running(pid)`` -> a context manager held while the
            process runs (e.g. sampling the machine's load).
    """
    return finish_worker(start_worker(command, environ), timeout_s, while_running)


def finish_worker(
    process: subprocess.Popen,
    timeout_s: float,
    while_running: Callable[[int], AbstractContextManager] | None = None,
    wait: Callable[[], str | None] | None = None,
    before_stop: Callable[[], None] = lambda: None,
) -> Finished:
    """Wait for a started worker (``wait()``, default ``communicate`` with ``timeout_s``,
    returns its stderr and raises `subprocess.TimeoutExpired`); stop it on a timeout or
    any exception, ``before_stop()`` first (`scanbench.execution.overlap` continues a stopped worker
    so that it can take the SIGTERM)."""
    if wait is None:

        def wait() -> str | None:
            return process.communicate(timeout=timeout_s)[1]

    context = while_running(process.pid) if while_running else nullcontext()
    try:
        raise_if_interrupted()  # a Ctrl-C during the fork may have been swallowed
        with context:
            stderr = wait()
    except subprocess.TimeoutExpired:
        before_stop()
        stop(process)
        return Finished(None, "", timed_out=True)
    except BaseException:
        before_stop()
        stop(process)
        raise
    return Finished(process.returncode, stderr or "")


def start_worker(
    command: list[str],
    environ: dict[str, str],
    pass_fds: tuple[int, ...] = (),
    death_signal: int = signal.SIGTERM,
) -> subprocess.Popen | Forked:
    """Start a worker: stderr captured, no stdin or stdout, dying with this process (the
    worker asks the kernel for ``death_signal`` when this process dies: `die_with_parent`,
    called by `exit_with_parent`). A worker this process may SIGSTOP
    (`scanbench.execution.overlap`) gets SIGCONT instead: a SIGTERM would wait, pending,
    for a SIGCONT that never comes, and the stopped orphan would hold its memory for
    ever; continued, its parent watch (`exit_with_parent`) sees the run gone and exits.

    Nothing runs between fork and exec (no ``preexec_fn``): `subprocess` spawns with
    ``vfork`` or ``posix_spawn``, safe in a parent that runs threads (JAX's). JAX warns at
    every ``os.fork`` of such a process; a fallback to fork there execs at once, so that
    warning (in a notebook's `compare(isolate=True)`) is not shown.

    A ``python -m`` worker is forked by the run's fork server instead
    (`scanbench.execution.forkserver.forked`), with the same environment, descriptors and
    death signal; the result is then a `Forked`, the part of ``Popen`` the run uses."""
    environ = {**environ, PARENT_PID: str(os.getpid()), DEATH_SIGNAL: str(int(death_signal))}
    child = forked(command, environ, pass_fds)
    if child is not None:
        return child
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning
        )
        return Spawned(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=environ,
            stdin=subprocess.DEVNULL,
            pass_fds=pass_fds,
            process_group=0,  # a group of its own (`scanbench.execution.worker_group`)
        )


class Spawned(subprocess.Popen):
    """A spawned worker: the leader of its own process group, its stderr read as it
    comes with only its tail kept (`scanbench.execution.worker_group`). ``communicate``
    returns that tail as text; ``send_signal`` signals the group while the worker is
    unreaped."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stderr = StderrTail(self.stderr)

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[None, str]:
        deadline = None if timeout is None else time.monotonic() + timeout
        self.wait(timeout)
        end_leftovers(self.pid)  # its own children hold its stderr open no longer
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        self._stderr.thread.join(left)
        if self._stderr.thread.is_alive():  # a descendant in another session holds it
            raise subprocess.TimeoutExpired(self.args, timeout)
        return None, self._stderr.text()

    def send_signal(self, sig: int) -> None:
        self.poll()
        if self.returncode is None:  # once reaped, the pid may be another process's
            signal_group(self.pid, sig)


def stop(process: subprocess.Popen | Forked) -> None:
    """SIGTERM to the worker's process group (the worker cleans its temp folder; its own
    children end with it), then SIGKILL after 5 s; reap it and what is left of its
    group."""
    if process.poll() is None:
        process.terminate()
        try:
            process.communicate(timeout=5)
            return
        except subprocess.TimeoutExpired:
            process.kill()
    with suppress(subprocess.TimeoutExpired, ValueError, OSError):
        process.communicate(timeout=30)

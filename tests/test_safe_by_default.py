"""Safe by default: workers spawned with nothing between fork and exec, pickled sources
only from the run's own private directory, caches checked for owner and mode, user
revisions after ``--end-of-options``, one journal per output, links to known hosts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from scanbench.execution import processes

# ---------------------------------------------------------------- spawning workers


def test_a_worker_is_spawned_with_nothing_between_fork_and_exec(monkeypatch):
    """No preexec_fn: subprocess takes its vfork/posix_spawn path, and nothing (no
    ldconfig, no library loading) runs in the child of a threaded parent."""
    seen: dict = {}

    class Spy:
        def __init__(self, command, **kwargs):
            seen.update(kwargs, command=command)

    monkeypatch.setattr(subprocess, "Popen", Spy)
    processes.start_worker(["true"], {"A": "1"}, death_signal=signal.SIGCONT)
    assert seen.get("preexec_fn") is None
    assert seen["env"][processes.DEATH_SIGNAL] == str(int(signal.SIGCONT))
    assert seen["env"][processes.PARENT_PID] == str(os.getpid())


def test_the_death_signal_is_asked_for_without_a_library_search(monkeypatch):
    import ctypes.util

    def no_search(name):
        raise AssertionError("find_library runs ldconfig: not in a worker's start-up")

    monkeypatch.setattr(ctypes.util, "find_library", no_search)
    expected = sys.platform.startswith("linux")
    # signal 0 clears the request: harmless in the test process
    assert processes.die_with_parent({processes.DEATH_SIGNAL: "0"}) is expected
    assert processes.die_with_parent({}) is False


RUNNER = """
import os, sys, time
from scanbench.execution.processes import start_worker
child = "from scanbench.execution.processes import exit_with_parent; " \\
    "exit_with_parent([]); import time; time.sleep(120)"
worker = start_worker([sys.executable, "-c", child], dict(os.environ))
print(worker.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_worker_dies_with_its_sigkilled_run():
    runner = subprocess.Popen([sys.executable, "-c", RUNNER], stdout=subprocess.PIPE, text=True)
    pid = int(runner.stdout.readline())
    time.sleep(2)  # past the worker's start-up, into its sleep
    assert _alive(pid)
    runner.kill()
    runner.wait()
    deadline = time.monotonic() + 15
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), "the worker outlived its SIGKILLed run"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False

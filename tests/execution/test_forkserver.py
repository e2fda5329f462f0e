"""Workers forked by the run's fork server (`scanbench.execution.forkserver`) are what
spawned ones are: the same environment, directory, descriptors, stdin/stdout, stderr and
exit status; each from a server that has run nothing; dying with their run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from scanbench.execution import forkserver
from scanbench.execution.processes import finish_worker, start_worker
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.skipif(
    not forkserver.enabled({}), reason="the fork server needs Linux's fork"
)
PROBE = [sys.executable, "-m", "tests.support.forked_probe"]


def _environ(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT), **extra}


def _run(tmp_path, name, *args, environ=None, pass_fds=(), timeout=120):
    out = tmp_path / f"{name}.json"
    worker = start_worker([*PROBE, args[0], str(out), *args[1:]], environ or _environ(), pass_fds)
    finished = finish_worker(worker, timeout)
    seen = json.loads(out.read_text()) if out.exists() else None
    return worker, finished, seen


@pytest.mark.parametrize("mode", ["forked", "spawned"])
def test_a_forked_worker_sees_what_a_spawned_one_sees(tmp_path, monkeypatch, mode):
    """Run in both modes, the probe must report the same process: its argv, directory,
    sys.path[0], environment, descriptors (a passed pipe at its number, writable),
    /dev/null for stdin and stdout, stderr captured, and no JAX backend started."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    read, write = os.pipe()
    number = write
    try:
        environ = _environ(PROBE_A="1", XLA_FLAGS="--xla_force_host_platform_device_count=3")
        if mode == "spawned":
            environ[forkserver.SWITCH] = "off"
        worker, finished, seen = _run(
            tmp_path, mode, "write-fd", str(write), environ=environ, pass_fds=(write,)
        )
        os.close(write)
        write = -1
        through = os.read(read, 100)
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)
    assert isinstance(worker, forkserver.Forked) is (mode == "forked")
    assert finished.returncode == 0
    assert "probe stderr: write-fd" in finished.stderr
    assert through == b"through the pipe"
    assert seen["name"] == "__main__"
    assert seen["argv"] == ["write-fd", str(tmp_path / f"{mode}.json"), str(number)]
    assert seen["cwd"] == str(work) and seen["path0"] == str(work)
    assert seen["env"] == {"PROBE_A": "1"}
    assert seen["xla_flags"] == "--xla_force_host_platform_device_count=3"
    assert seen["devices"] == 3, "XLA read the worker's flags, not the server's"
    assert list(seen["fds"]) == [str(number)], f"only the passed descriptor is open: {seen['fds']}"
    assert seen["stdin"] == seen["stdout"] == os.devnull
    assert not seen["backends_started"]


def test_each_worker_is_forked_from_a_server_that_has_run_nothing(tmp_path):
    """A child that changes the engine's state leaves the next child's untouched; both
    come from one server (same parent), started once."""
    _, first, a = _run(tmp_path, "a", "exit", "0")
    _, second, b = _run(tmp_path, "b", "exit", "0")
    assert first.returncode == second.returncode == 0
    assert a["runs_seen"] == b["runs_seen"] == 1
    assert a["ppid"] == b["ppid"] != os.getpid()


def test_workers_share_a_server_only_when_the_imports_see_the_same_environment(tmp_path):
    """XLA's flags and scanbench's own settings are read after the imports: one server.
    Any other variable may be read by them: a server of its own."""
    _, _, plain = _run(tmp_path, "plain", "exit", "0")
    _, _, flags = _run(
        tmp_path, "flags", "exit", "0", environ=_environ(XLA_FLAGS="--xla_dump_hlo_as_text")
    )
    _, _, other = _run(tmp_path, "other", "exit", "0", environ=_environ(PROBE_B="2"))
    assert plain["ppid"] == flags["ppid"]
    assert other["ppid"] != plain["ppid"]


def test_exit_codes_signals_exceptions_and_timeouts_read_as_a_spawned_workers(tmp_path):
    _, code, _ = _run(tmp_path, "code", "exit", "3")
    assert code.returncode == 3 and code.failure(60).startswith("worker exited with code 3")
    _, segv, _ = _run(tmp_path, "segv", "segv")
    assert "killed by SIGSEGV (signal 11)" in segv.failure(60)
    assert "not by scanbench" not in segv.failure(60)
    _, raised, _ = _run(tmp_path, "raise", "raise")
    assert raised.returncode == 1 and "the probe failed on purpose" in raised.stderr
    started = time.monotonic()
    worker, slow, _ = _run(tmp_path, "slow", "sleep", "60", timeout=1)
    assert slow.timed_out and time.monotonic() - started < 30
    assert worker.poll() is not None, "the timed-out worker was stopped and reaped"


def test_a_server_that_cannot_start_leaves_its_workers_spawned(tmp_path, monkeypatch):
    """An interpreter whose scanbench has no fork server (a gate's older baseline): the
    worker is spawned as before, and the server is not tried again."""
    monkeypatch.setattr(forkserver, "MODULE", "scanbench.execution.no_such_server")
    environ = _environ(PROBE_C="unavailable")  # a server of its own
    worker, finished, seen = _run(tmp_path, "spawned", "exit", "0", environ=environ)
    assert isinstance(worker, subprocess.Popen)
    assert finished.returncode == 0 and seen["ppid"] == os.getpid()
    key = (os.getpid(), sys.executable, forkserver.import_environment(environ))
    assert key in forkserver._unavailable


RUNNER = """
import os, signal, sys, time
from scanbench.execution.processes import start_worker
command = [sys.executable, "-m", "tests.support.forked_probe", "sleep", sys.argv[1], "300"]
worker = start_worker(command, dict(os.environ), death_signal=signal.SIGCONT)
print(worker.pid, type(worker).__name__, flush=True)
time.sleep(300)
"""


def test_a_forked_worker_and_its_server_die_with_a_sigkilled_run(tmp_path):
    runner = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(tmp_path / "seen.json")],
        stdout=subprocess.PIPE,
        text=True,
        env=_environ(),
    )
    pid, kind = runner.stdout.readline().split()
    pid = int(pid)
    assert kind == "Forked"
    deadline = time.monotonic() + 60
    while not (tmp_path / "seen.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    server = json.loads((tmp_path / "seen.json").read_text())["ppid"]
    os.kill(pid, signal.SIGSTOP)  # a stopped worker, as the overlap leaves one
    runner.kill()
    runner.wait()
    deadline = time.monotonic() + 15
    while (_alive(pid) or _alive(server)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), "the forked worker outlived its run"
    assert not _alive(server), "the fork server outlived its run"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_worker_whose_server_dies_first_is_ended_and_says_why(tmp_path):
    """SIGKILL the server under a running worker: the worker gets its death signal, the
    runner learns it is gone (its status is lost: `LOST`, with a line saying why), and
    the next worker gets a new server."""
    out = tmp_path / "sleeping.json"
    worker = start_worker([*PROBE, "sleep", str(out), "300"], _environ(PROBE_D="server dies"))
    deadline = time.monotonic() + 60
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    server = json.loads(out.read_text())["ppid"]
    os.kill(server, signal.SIGKILL)
    finished = finish_worker(worker, 60)
    assert finished.returncode == forkserver.LOST
    assert "the fork server ended before this worker" in finished.stderr
    deadline = time.monotonic() + 15
    while _alive(worker.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(worker.pid), "the worker outlived its server"
    _, again, seen = _run(tmp_path, "again", "exit", "0", environ=_environ(PROBE_D="server dies"))
    assert again.returncode == 0 and seen["ppid"] not in (server, os.getpid())


def _children(pid: int) -> list[int]:
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry))
    return found


# Seen twice in about 100 runs on a quiet machine (2026-12-06): the late child still
# running 15 s on, SIGTERM still blocked, before `forking._become`. Not understood yet;
# run once more so that a rare stall does not hide every other result of CI.
@pytest.mark.flaky(reruns=1)
def test_a_start_that_gives_up_stops_its_child_and_spawns_instead(tmp_path, monkeypatch):
    """A fork the runner stopped waiting for (here: no time to answer at all) is not
    left running beside the spawned worker that replaces it, and that server is not
    asked again."""
    environ = _environ(PROBE_E="gives up")
    _, first, _ = _run(tmp_path, "first", "exit", "0", environ=environ)  # the server, up
    assert first.returncode == 0
    key = (os.getpid(), sys.executable, forkserver.import_environment(environ))
    server = forkserver._servers[key]
    monkeypatch.setattr(forkserver, "REPLY_TIMEOUT_S", 0.5)
    # a stalled server: it cannot answer in time (with no time at all to answer, a
    # server quick enough to reply before the runner waits was used: a race), and forks
    # its child late, once it runs again
    os.kill(server.pid, signal.SIGSTOP)
    started = time.monotonic()
    try:
        worker, _, _ = _run(tmp_path, "spawned", "quiet-sleep", "30", environ=environ, timeout=3)
    finally:
        os.kill(server.pid, signal.SIGCONT)
    assert isinstance(worker, subprocess.Popen)
    assert time.monotonic() - started < 20
    deadline = time.monotonic() + 15
    while _children(server.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _children(server.pid)
    assert not left, "the abandoned fork still runs"
    assert not server.alive(), "a server that did not answer is used again"


def test_a_server_with_a_running_worker_is_never_evicted(tmp_path, monkeypatch):
    monkeypatch.setattr(forkserver, "MAX_SERVERS", 1)
    out = tmp_path / "long.json"
    long = start_worker([*PROBE, "sleep", str(out), "3"], _environ(PROBE_F="first"))
    deadline = time.monotonic() + 60
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    _, other, _ = _run(tmp_path, "other", "exit", "0", environ=_environ(PROBE_F="second"))
    assert other.returncode == 0
    finished = finish_worker(long, 60)
    assert finished.returncode == 0, finished.stderr

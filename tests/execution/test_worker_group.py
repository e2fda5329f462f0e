"""A worker's own children end with it, and its stderr is kept bounded: the worker leads
a process group (`scanbench.execution.worker_group`), forked or spawned alike."""

from __future__ import annotations

import os
import sys
import time

import pytest

from scanbench.execution import forkserver, worker_group
from scanbench.execution.processes import finish_worker, start_worker
from tests.support.paths import REPO_ROOT

PROBE = [sys.executable, "-m", "tests.support.forked_probe"]
MODES = ["forked", "spawned"] if forkserver.enabled({}) else ["spawned"]


def _start(tmp_path, mode, *args):
    environ = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    if mode == "spawned":
        environ[forkserver.SWITCH] = "off"
    return start_worker([*PROBE, args[0], str(tmp_path / "seen.json"), *args[1:]], environ)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _child_pid(path, deadline_s: float = 60) -> int:
    deadline = time.monotonic() + deadline_s
    while not path.exists():
        assert time.monotonic() < deadline, "the probe never started its child"
        time.sleep(0.05)
    return int(path.read_text())


def _gone(pid: int, within_s: float = 10) -> bool:
    deadline = time.monotonic() + within_s
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("mode", MODES)
def test_a_timed_out_workers_own_children_are_stopped_with_it(tmp_path, mode):
    child_file = tmp_path / "child.pid"
    worker = _start(tmp_path, mode, "child-then-sleep", str(child_file), "120")
    child = _child_pid(child_file)
    assert _alive(child)
    assert os.getpgid(worker.pid) == worker.pid, "the worker leads a group of its own"
    finished = finish_worker(worker, timeout_s=1)
    assert finished.timed_out
    assert _gone(child), "the timed-out worker's child outlived it"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("mode", MODES)
def test_a_child_left_running_by_a_finished_worker_is_ended_not_waited_for(tmp_path, mode):
    """Before, its child held the worker's stderr open: the run waited for it until the
    cell's timeout, and the child ran on."""
    child_file = tmp_path / "child.pid"
    worker = _start(tmp_path, mode, "child-then-exit", str(child_file))
    started = time.monotonic()
    finished = finish_worker(worker, timeout_s=60)
    assert not finished.timed_out and finished.returncode == 0
    assert time.monotonic() - started < 30
    assert _gone(_child_pid(child_file))


@pytest.mark.parametrize("mode", MODES)
def test_a_flooded_stderr_keeps_its_tail_and_says_how_much_was_left_out(tmp_path, mode):
    megabytes = 8
    finished = finish_worker(_start(tmp_path, mode, "flood", str(megabytes)), timeout_s=120)
    assert finished.returncode == 1
    kept = finished.stderr
    assert len(kept.encode()) <= worker_group.KEPT_BYTES + 200
    assert kept.rstrip().endswith("the last line of a flood")
    total = int(kept.split("(stderr: ", 1)[1].split(" bytes", 1)[0].replace(",", ""))
    assert total >= megabytes * 2**20
    failure = finished.failure(60)
    assert "the last line of a flood" in failure
    assert f"(stderr: {total:,} bytes; the first" in failure  # the cut is said in the error


def test_the_tail_holds_the_last_bytes_whole_lines_and_counts_every_byte():
    class Stream:
        def __init__(self, chunks):
            self.chunks = list(chunks)

        def read(self, size):
            return self.chunks.pop(0) if self.chunks else b""

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    lines = [f"line {i:07d}\n".encode() for i in range(100_000)]  # 1.3 MB
    tail = worker_group.StderrTail(Stream(lines))
    tail.thread.join(10)
    text = tail.text()
    assert tail.total == sum(map(len, lines))
    head, body = text.split("\n", 1)
    assert head == f"(stderr: {tail.total:,} bytes; the first {tail.total - len(body):,} left out)"
    assert body.startswith("line ") and body.endswith("line 0099999\n")
    assert len(body) <= worker_group.KEPT_BYTES
    short = worker_group.StderrTail(Stream([b"one\n", b"two\n"]))
    short.thread.join(10)
    assert short.text() == "one\ntwo\n"


def test_a_sigkill_scanbench_did_not_send_is_said_to_come_from_elsewhere():
    import signal

    from scanbench.execution.processes import Finished

    said = Finished(-signal.SIGKILL, "").failure(60)
    assert said.startswith("worker killed by SIGKILL (signal 9) by another process")
    assert "out-of-memory" in said and "dmesg" in said
    assert Finished(None, "", timed_out=True).failure(60).startswith("timeout")

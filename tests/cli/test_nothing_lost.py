"""Nothing lost, nothing hidden: interrupted runs keep their cells and resume, workers die
with their run, crashed cells are shown, outputs and inputs are checked at the door."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scanbench.cli.main import main
from scanbench.execution import forkserver
from scanbench.execution.journal import journal_path, read_journal
from scanbench.results import load_run
from tests.support.paths import DATA, REPO_ROOT, SCENARIO_FILES

ROOT = REPO_ROOT
TOY = str(SCENARIO_FILES / "toy.py")


def scanbench(*args: str, **kwargs) -> subprocess.Popen:
    command = [sys.executable, "-m", "scanbench.cli.main", *args]
    return subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs
    )


def run_toy(out: Path, backends: list[str], *extra: str) -> list[str]:
    args = [
        "run",
        "--scenario-file",
        TOY,
        "--size",
        "smoke",
        "--min-time",
        "0.01",
        "--max-time",
        "0.2",
    ]
    args += [a for b in backends for a in ("--backend", b)]
    return [*args, "--out", str(out), "--quiet", "--no-probes", *extra]


def wait_for_records(journal: Path, count: int, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if journal.exists() and len(read_journal(journal)[2]) >= count:
            return
        time.sleep(0.1)
    raise AssertionError(f"{journal} did not reach {count} records")


@pytest.mark.parametrize(
    ("signum", "code", "overlap"),
    [(signal.SIGINT, 130, False), (signal.SIGTERM, 143, True)],
    ids=["sigint-one-at-a-time", "sigterm-two-at-a-time"],
)
def test_an_interrupted_run_keeps_its_cells_and_resumes(tmp_path, signum, code, overlap):
    """One cell at a time: `good` saved, `hang` running, `delayed` not started. Two at a
    time (`scanbench.execution.overlap`): `good` and `hang` start together; the signal stops
    `hang`'s worker from the runner's thread pool and nothing it ended is saved."""
    out = tmp_path / "run.json"
    backends = ["good", "hang"] if overlap else ["good", "hang", "delayed"]
    extra = () if overlap else ("--no-overlap",)
    process = scanbench(*run_toy(out, backends, "--timeout", "20", *extra))
    wait_for_records(journal_path(out), 1)
    time.sleep(0.5)  # the hanging cell is running now
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == code, stderr
    assert f"interrupted: 1 of {len(backends)} cells saved in {out}" in stderr
    assert f"scanbench run --resume {out}" in stderr and "Traceback" not in stderr
    assert [r.backend for r in load_run(out).records] == ["good"]
    resumed = scanbench("run", "--resume", str(out), "--quiet")
    _, stderr = resumed.communicate(timeout=120)
    assert resumed.returncode == 1, stderr  # the hanging cell fails (timeout), as stored
    assert "resuming" in stderr and f"{len(backends) - 1} of {len(backends)} cells to run" in stderr
    records = load_run(out).records
    assert [r.backend for r in records] == backends
    assert "timeout" in records[1].error
    if not overlap:
        assert records[2].status == "ok"
    assert not journal_path(out).exists()  # complete: the results file holds everything
    again = scanbench("run", "--resume", str(out), "--quiet")
    _, stderr = again.communicate(timeout=60)
    assert f"nothing to resume: all {len(backends)} cells" in stderr


def test_resume_refuses_another_environment_without_force(tmp_path):
    out = tmp_path / "run.json"
    # a long timeout: the run must be interrupted while "hang" runs, even on a loaded machine
    process = scanbench(*run_toy(out, ["good", "hang"], "--timeout", "40"))
    wait_for_records(journal_path(out), 1)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    journal = journal_path(out)
    lines = journal.read_text().splitlines()
    header = json.loads(lines[0])
    header["environment"]["git_commit"] = "0" * 40
    journal.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    refused = scanbench("run", "--resume", str(out), "--quiet")
    _, stderr = refused.communicate(timeout=60)
    assert refused.returncode == 2
    assert "cannot resume" in stderr and "git_commit '0000" in stderr and "--force" in stderr


def test_a_killed_run_takes_its_worker_and_temp_folder_with_it(tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    out = tmp_path / "run.json"
    env = dict(os.environ, TMPDIR=str(temp))
    process = scanbench(*run_toy(out, ["hang"], "--timeout", "120"), env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(temp.glob("scanbench-cell-*/spec.json")):
        time.sleep(0.1)
    (folder,) = temp.glob("scanbench-cell-*")
    time.sleep(1.0)  # the worker has started
    # the run's other processes (its worker, and the fork server that forked it, whose
    # command line the worker shows) are those with its TMPDIR
    workers = [pid for pid in _with_environ(f"TMPDIR={temp}") if pid != str(process.pid)]
    assert len(workers) >= (2 if forkserver.enabled(env) else 1), f"no worker in {workers}"
    process.kill()
    process.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (folder.exists() or _alive(workers)):
        time.sleep(0.1)
    assert not _alive(workers), "the worker outlived its run"
    assert not folder.exists(), "the worker's temp folder was left behind"


def _with_environ(entry: str) -> list[str]:
    """The pids of this user's processes whose environment holds ``entry`` (KEY=VALUE)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                if entry.encode() in environ.read().split(b"\0"):
                    found.append(pid)
        except OSError:  # gone, or not ours
            continue
    return found


def _alive(pids: list[str]) -> bool:
    alive = []
    for pid in pids:
        try:
            os.kill(int(pid), 0)
            status = Path(f"/proc/{pid}/status").read_text()
            alive.append("State:\tZ" not in status)
        except (ProcessLookupError, FileNotFoundError):
            alive.append(False)
    return any(alive)


def test_crashed_cells_are_shown_in_their_table_with_the_signal(tmp_path):
    out = tmp_path / "run.json"
    md = tmp_path / "run.md"
    process = scanbench(*run_toy(out, ["good", "segfault", "crash"], "--md", str(md)))
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 1, stderr
    records = {r.backend: r for r in load_run(out).records}
    crashed = records["segfault"]
    assert crashed.status == "failed" and crashed.size_params == {"n": 8}
    assert "killed by SIGSEGV (signal 11)" in crashed.error
    assert "about to crash" in crashed.error  # the end of its stderr
    assert "worker exited with code 3" in records["crash"].error
    text = md.read_text()
    assert "Not compared" not in text
    assert "- **segfault** failed: worker killed by SIGSEGV" in text
    glance = text.split("## At a glance", 1)[1].split("##", 1)[0]
    assert "| 2 " in glance  # failed / skipped counted


def test_outputs_are_checked_before_anything_runs(tmp_path, capsys):
    existing = tmp_path / "old.json"
    existing.write_text("precious")
    assert main(run_toy(existing, ["good"])) == 2
    assert "exists; give another path, --force" in capsys.readouterr().err
    assert existing.read_text() == "precious"
    same = tmp_path / "s.json"
    assert main(run_toy(same, ["good"], "--md", str(same))) == 2
    assert "must be different files" in capsys.readouterr().err
    assert not same.exists()


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("x = (\n", ":1: syntax error: '(' was never closed"),
        ("import numpy\nimport not_a_module_xyz\n", ":2: ModuleNotFoundError"),
        ("def f():\n    raise RuntimeError('boom')\n\nf()\n", ":2: RuntimeError: boom"),
    ],
)
def test_a_broken_scenario_file_is_one_line_with_its_line(tmp_path, capsys, source, message):
    path = tmp_path / "mine.py"
    path.write_text(source)
    assert main(["run", "--scenario-file", str(path), "--size", "smoke"]) == 2
    err = capsys.readouterr().err
    assert f"{path}{message}" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--timeout", "nan"),
        ("--timeout", "inf"),
        ("--min-time", "nan"),
        ("--seed", "99999999999999999999"),
        ("--seed", "-1"),
        ("--warmup", "-2"),
    ],
)
def test_cli_numbers_are_validated(capsys, option, value):
    assert main(["run", "--size", "smoke", option, value]) == 2
    err = capsys.readouterr().err
    assert f"{option} must be" in err and len(err.strip().splitlines()) == 1


def test_the_report_never_overwrites_its_input(tmp_path, capsys):
    source = DATA / "toy-failed.json"
    copy = tmp_path / "in.json"
    copy.write_text(source.read_text())
    assert main(["report", str(copy), "--md", str(copy)]) == 2
    assert "is one of the input files" in capsys.readouterr().err
    assert load_run(copy).records  # untouched


def test_a_signal_whose_exception_was_swallowed_still_stops_the_run():
    """A Ctrl-C that lands in a callback whose exceptions Python ignores (logging's
    after-fork hook while a worker starts: seen once as 'Exception ignored in:
    _releaseLock', and the run went on) is raised right after the worker starts, and the
    worker is stopped."""
    from scanbench.execution.interrupts import Interrupted, signals_raise
    from scanbench.execution.processes import run_worker_process

    with signals_raise():
        handler = signal.getsignal(signal.SIGINT)
        with contextlib.suppress(Interrupted):  # what an ignored-exception callback does
            handler(signal.SIGINT, None)
        started = time.perf_counter()
        with pytest.raises(Interrupted) as raised:
            run_worker_process([sys.executable, "-c", "import time; time.sleep(60)"], {}, 120)
        assert raised.value.exit_code == 130
        assert time.perf_counter() - started < 30  # stopped, not waited for
    with signals_raise():  # a new block starts with nothing pending
        finished = run_worker_process([sys.executable, "-c", "pass"], dict(os.environ), 60)
        assert finished.returncode == 0


def test_a_worker_leaves_a_multi_process_run_before_skipping_the_teardown(monkeypatch):
    """`scanbench.execution.worker.leave` exits with ``os._exit`` (its result is already on disk),
    but first shuts the multi-process run down, as JAX's own exit hook would."""
    import jax

    import scanbench.execution.worker as worker
    from scanbench.sharding.distributed import COORDINATOR

    calls: list = []

    def fake_exit(code):
        calls.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(jax.distributed, "shutdown", lambda: calls.append("shutdown"))
    monkeypatch.setattr(os, "_exit", fake_exit)
    monkeypatch.setenv(COORDINATOR, "127.0.0.1:1")
    with pytest.raises(SystemExit):
        worker.leave(3)
    assert calls == ["shutdown", 3]
    monkeypatch.delenv(COORDINATOR)
    with pytest.raises(SystemExit):
        worker.leave(0)
    assert calls == ["shutdown", 3, 0]  # one process: nothing to shut down


def test_a_ctrl_c_while_the_reports_are_written_is_one_line(tmp_path, monkeypatch, capsys):
    """A finished run's results are whole when its reports are written: a Ctrl-C then (a
    user who pressed it just as the last cell ended) says so in one line, exit 130, and
    names the command that writes them again; no traceback."""
    import argparse
    import shutil

    from scanbench.cli import run as run_command
    from scanbench.cli.main import _run
    from scanbench.reports import written

    out = tmp_path / "tdma.json"
    shutil.copyfile(DATA / "tdma.json", out)

    def interrupted(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # the signal's handler raises here
        raise AssertionError("SIGINT did not stop the reports")

    monkeypatch.setattr(written, "write_reports", interrupted)
    args = argparse.Namespace(md=None, html=None, quiet=True, command="run")
    args.handler = lambda namespace: run_command.finish(load_run(out), out, namespace)
    assert _run(args) == 130
    err = capsys.readouterr().err
    assert err.strip() == (
        f"interrupted while writing the reports: every cell is saved in {out}; "
        f"`scanbench report {out}` writes them again"
    )
    assert load_run(out).records  # the results are untouched


def _cut_short(out: Path, saved: int) -> list[str]:
    """A run of `toy-failed.json`'s three cells cut short between its journal and its
    results file (a full disk, a SIGKILL after the last journal line): the journal holds
    every cell, the results file the first ``saved``. Returns the backends of the cells."""
    run = load_run(DATA / "toy-failed.json")
    header = {"journal": 1, "environment": dict(run.environment)}
    header["invocation"] = run.invocation.to_json()
    lines = [header, *({"record": record.to_json()} for record in run.records)]
    journal_path(out).write_text("".join(json.dumps(line) + "\n" for line in lines))
    data = json.loads((DATA / "toy-failed.json").read_text())
    data["records"] = data["records"][:saved]
    out.write_text(json.dumps(data))
    return [record.backend for record in run.records]


def test_resume_saves_the_cells_a_full_disk_kept_out_of_the_results(tmp_path, capsys):
    """Before: "nothing to resume", 1 of 3 cells kept, the journal left behind, exit 0."""
    out = tmp_path / "run.json"
    backends = _cut_short(out, saved=1)
    assert main(["run", "--resume", str(out), "--quiet"]) == 1  # toy-failed: a failed cell
    err = capsys.readouterr().err
    assert f"saved 2 cells from run.json.journal that {out} lacked" in err
    assert [record.backend for record in load_run(out).records] == backends
    assert not journal_path(out).exists()


def test_force_never_deletes_cells_only_the_journal_holds(tmp_path, capsys):
    """Before: --force deleted the journal and the two cells only it held, unsaid."""
    out = tmp_path / "run.json"
    _cut_short(out, saved=1)
    journal = journal_path(out).read_bytes()
    assert main(run_toy(out, ["good"], "--force")) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"scanbench: error: --out {str(out)!r}: run.json.journal holds 2 measured cells that "
        f"run.json lacks; `scanbench run --resume {out}` saves them (then --force starts "
        "over), or delete run.json.journal to give them up"
    )
    assert journal_path(out).read_bytes() == journal and len(load_run(out).records) == 1
    journal_path(out).write_text("not a journal\nat all\n")
    assert main(run_toy(out, ["good"], "--force")) == 2
    assert "cannot be read" in capsys.readouterr().err


def test_a_full_disk_stops_the_run_in_one_line_and_resume_saves_its_cells(
    tmp_path, monkeypatch, capsys
):
    """The results file cannot be written after a cell's journal line (ENOSPC): the run
    stops in one line naming --resume (before: a traceback, exit 70), and the resume
    saves every journaled cell. Cells are replayed from a stored run, not measured."""
    import errno

    from scanbench.execution import runner

    stored = load_run(DATA / "toy-failed.json")
    out = tmp_path / "run.json"
    real_write = runner.write_run

    def full_disk(path, run):
        if len(run.records) >= 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real_write(path, run)

    def replay(cells, measure, show_progress, on_record, machine):
        by_key = {record.key: record for record in stored.records}
        for cell in cells:
            on_record(by_key[cell.key])

    monkeypatch.setattr(runner, "write_run", full_disk)
    monkeypatch.setattr(runner, "run_cells", replay)
    environment = dict(stored.environment)
    with pytest.raises(runner.StoreError) as stopped:
        runner.execute(stored.invocation, out, environment, new=True)
    assert str(stopped.value) == (
        f"cannot save the run in {out} ({out}: No space left on device); the run is "
        "stopped: 2 measured cells are in run.json.journal; free the space, then "
        f"`scanbench run --resume {out}` saves them and runs the rest"
    )
    assert len(load_run(out).records) == 1 and len(read_journal(journal_path(out))[2]) == 2
    monkeypatch.setattr(runner, "write_run", real_write)
    monkeypatch.setattr(runner, "resumable", lambda out, env, invocation, force: invocation)
    runner.resume(out)
    assert [r.backend for r in load_run(out).records] == [r.backend for r in stored.records]
    assert not journal_path(out).exists()

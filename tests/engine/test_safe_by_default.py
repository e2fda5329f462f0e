"""Safe by default: workers spawned with nothing between fork and exec, pickled sources
only from the run's own private directory, caches checked for owner and mode, user
revisions after ``--end-of-options``, one journal per output, links to known hosts."""

from __future__ import annotations

import json
import os
import pickle
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scanbench.execution import parent_watch, processes
from tests.support.paths import DATA, SCENARIO_FILES

# ---------------------------------------------------------------- spawning workers


def test_a_worker_is_spawned_with_nothing_between_fork_and_exec(monkeypatch):
    """No preexec_fn: subprocess takes its vfork/posix_spawn path, and nothing (no
    ldconfig, no library loading) runs in the child of a threaded parent."""
    seen: dict = {}

    class Spy:
        def __init__(self, command, **kwargs):
            seen.update(kwargs, command=command)

    monkeypatch.setattr(processes, "Spawned", Spy)
    processes.start_worker(["true"], {"A": "1"}, death_signal=signal.SIGCONT)
    assert seen.get("preexec_fn") is None
    assert seen["process_group"] == 0  # setpgid in the child: vfork allows it
    assert seen["env"][parent_watch.DEATH_SIGNAL] == str(int(signal.SIGCONT))
    assert seen["env"][parent_watch.PARENT_PID] == str(os.getpid())


def test_the_death_signal_is_asked_for_without_a_library_search(monkeypatch):
    import ctypes.util

    def no_search(name):
        raise AssertionError("find_library runs ldconfig: not in a worker's start-up")

    monkeypatch.setattr(ctypes.util, "find_library", no_search)
    expected = sys.platform.startswith("linux")
    # signal 0 clears the request: harmless in the test process
    assert parent_watch.die_with_parent({parent_watch.DEATH_SIGNAL: "0"}) is expected
    assert parent_watch.die_with_parent({}) is False


RUNNER = """
import os, sys, time
from scanbench.execution.processes import start_worker
child = "from scanbench.execution.parent_watch import exit_with_parent; " \\
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


# ---------------------------------------------------------------- crashes


def test_a_crash_exits_70_with_its_traceback_and_one_line(capsys, monkeypatch):
    """Not 1 (a failed cell, a regression) nor 2 (a usage error): a code of its own."""
    from scanbench.cli import main as cli

    def crash(args):
        return {}["missing"]

    monkeypatch.setattr(cli.listing, "run", crash)
    assert cli.main(["list"]) == cli.CRASHED == 70
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "KeyError: 'missing'" in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("scanbench: internal error: `scanbench list` crashed (KeyError: ")
    assert "exit code 70" in last


# ---------------------------------------------------------------- pickled sources

TOY = str(SCENARIO_FILES / "toy.py")


def _planted_pickle(folder: Path) -> Path:
    """A pickle that would run code when loaded (it only touches a file here)."""
    marker = folder / "pwned"

    class Payload:
        def __reduce__(self):
            return (Path.touch, (marker,))

    path = folder / "scenario.pkl"
    path.write_bytes(pickle.dumps({"SCENARIO": Payload()}))
    return path


def test_a_pickled_source_on_the_command_line_is_refused(tmp_path, capsys):
    from scanbench.cli.main import main

    planted = _planted_pickle(tmp_path)
    out = tmp_path / "out.json"
    assert main(["run", "--scenario", f"{planted}:SCENARIO", "--out", str(out)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "a pickled scenario runs code when it is loaded" in line
    assert not (tmp_path / "pwned").exists() and not out.exists()


def test_a_pickled_source_in_a_gate_file_is_refused(tmp_path, capsys):
    from scanbench.cli.main import main

    planted = _planted_pickle(tmp_path)
    gates = tmp_path / "gates.toml"
    gates.write_text(
        "[settings]\ncounts_file = 'counts.toml'\n[[invariant]]\n"
        f"scenario = '{planted}:SCENARIO'\nsize = 'smoke'\nfaster = 'a'\nslower = 'b'\n"
        "factor = 1.5\n"
    )
    assert main(["gate", "--gates", str(gates)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "a pickled scenario runs code when it is loaded" in line
    assert not (tmp_path / "pwned").exists()


def test_a_pickled_source_in_a_stored_run_is_refused_on_resume(tmp_path, capsys):
    from scanbench.cli.main import main

    planted = _planted_pickle(tmp_path)
    stored = json.loads((DATA / "toy-failed.json").read_text())
    for cell in stored["invocation"]["cells"]:
        cell["source"] = f"{planted}:SCENARIO"
    stored["records"] = stored["records"][:1]
    out = tmp_path / "run.json"
    out.write_text(json.dumps(stored))
    assert main(["run", "--resume", str(out)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "a pickled scenario runs code when it is loaded" in line
    assert not (tmp_path / "pwned").exists()


def test_a_pickled_source_loads_only_from_the_runs_private_folder(tmp_path):
    from scanbench.api import InputError
    from scanbench.sources import _load_pickled, load, pickle_directory, write_pickled

    toy = load(f"{TOY}:SCENARIO")
    with pickle_directory() as folder:
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        path = write_pickled({"SCENARIO": toy}, folder / "toy.pkl")
        assert _load_pickled(str(path)).SCENARIO.name == toy.name
        folder.chmod(0o755)  # readable by others: not private any more
        with pytest.raises(InputError, match="it must be private to this user"):
            _load_pickled(str(path))
        folder.chmod(0o700)
        link = folder / "link.pkl"
        link.symlink_to(_planted_pickle(tmp_path))
        with pytest.raises(InputError, match="is a symbolic link"):
            _load_pickled(str(link))
    with pytest.raises(InputError, match="only from the run's own private folder"):
        _load_pickled(str(path))  # the block is over: its folder is no longer the run's
    assert not (tmp_path / "pwned").exists()


# ---------------------------------------------------------------- owner and mode


def test_a_folder_others_can_write_is_refused(tmp_path):
    from scanbench.api import InputError
    from scanbench.ownership import check_owned

    folder = tmp_path / "cache"
    folder.mkdir()
    folder.chmod(0o755)
    assert check_owned(folder, "$X") == folder
    folder.chmod(0o775)
    with pytest.raises(InputError, match=r"\$X .* has mode 0775 \(group or others can write it\)"):
        check_owned(folder, "$X")
    link = tmp_path / "link"
    link.symlink_to(folder)
    with pytest.raises(InputError, match="is a symbolic link"):
        check_owned(link, "$X")
    with pytest.raises(InputError, match="No such file"):
        check_owned(tmp_path / "missing", "$X")


@pytest.mark.skipif(os.getuid() != 0, reason="giving a folder to another user takes root")
def test_another_users_folder_is_refused(tmp_path):
    from scanbench.api import InputError
    from scanbench.ownership import check_owned

    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o755)
    os.chown(folder, 12345, 12345)
    with pytest.raises(InputError, match="owned by uid 12345, not by this user"):
        check_owned(folder, "$X")


def test_a_reference_cache_others_can_write_is_refused(tmp_path, monkeypatch):
    import jax
    import jax.numpy as jnp

    from scanbench.api import InputError
    from scanbench.execution.reference_cache import CACHE_ENV, compile_reference

    lowered = jax.jit(jnp.sin).lower(jax.ShapeDtypeStruct((4,), jnp.float32))
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv(CACHE_ENV, str(shared))
    with pytest.raises(InputError, match=r"CACHE .* \(group or others can write it\)"):
        compile_reference(lowered)
    assert not list(shared.iterdir())  # nothing written, nothing loaded


def test_a_venv_cache_others_can_write_is_refused(tmp_path, monkeypatch):
    from scanbench.api import InputError
    from scanbench.checkout import own_checkout
    from scanbench.gate.environments import requirement_venv

    if own_checkout() is None:
        pytest.skip("venvs are built from scanbench's checkout")
    shared = tmp_path / "cache"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("SCANBENCH_CACHE", str(shared))
    with pytest.raises(InputError, match=r"\$SCANBENCH_CACHE.* \(group or others can write it\)"):
        requirement_venv(["jax"], tmp_path)
    assert not list(shared.iterdir())  # nothing made inside it


# ---------------------------------------------------------------- user revisions and git


@pytest.fixture
def repository(tmp_path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (("init", "-q"), ("commit", "-q", "--allow-empty", "-m", "one")):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True
        )
    return repo


def test_a_revision_spelled_like_an_option_is_read_as_a_revision(repository, tmp_path):
    """``--output=FILE`` before --end-of-options would make git log write FILE."""
    from scanbench.api import InputError
    from scanbench.gate.interleave import worktree
    from scanbench.history.bisection import resolve

    planted = tmp_path / "written-by-git"
    with pytest.raises(InputError, match="not a commit"):
        resolve(repository, f"--output={planted}", "GOOD")
    with (
        pytest.raises(InputError, match="not a commit"),
        worktree(f"--output={planted}", repository),
    ):
        pass
    assert not list(tmp_path.glob("written-by-git*"))
    assert resolve(repository, "HEAD", "GOOD").sha  # a real revision still resolves


# ---------------------------------------------------------------- one journal per output


def test_a_journal_is_claimed_by_one_run_only(tmp_path):
    from scanbench.api import InputError
    from scanbench.execution.journal import Journal, in_use, read_journal

    path = tmp_path / "out.json.journal"
    first = Journal.create(path, {"run": "first"}, {})
    assert in_use(path)
    with pytest.raises(InputError, match="another scanbench run is writing to it now"):
        Journal.create(path, {"run": "second"}, {})
    with pytest.raises(InputError, match="another scanbench run is writing to it now"):
        Journal.reopen(path)
    assert read_journal(path)[0] == {"run": "first"}  # untouched
    first.close()
    assert not in_use(path)
    with pytest.raises(InputError, match=r"exists .* --resume"):
        Journal.create(path, {"run": "third"}, {})  # an interrupted run's: not replaced
    with Journal.reopen(path) as resumed:  # a resume takes it over
        assert in_use(path)
        resumed.remove()
    assert not path.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_new_run_is_refused_an_output_another_run_writes(tmp_path):
    from scanbench.api import InputError
    from scanbench.execution.journal import Journal, journal_path
    from scanbench.execution.runner import check_outputs, load_interrupted

    out = tmp_path / "out.json"
    journal = Journal.create(journal_path(out), {}, {})
    with pytest.raises(InputError, match="another scanbench run is writing to it now"):
        check_outputs(out, (), force=True)  # even with --force
    with pytest.raises(InputError, match="another scanbench run is writing to it now"):
        load_interrupted(out)  # --resume, before it collects anything
    journal.close()  # now an interrupted run's journal
    with pytest.raises(InputError, match="holds an interrupted run"):
        check_outputs(out, (), force=False)
    check_outputs(out, (), force=True)  # --force starts over
    assert not journal_path(out).exists()


def test_two_runs_with_one_out_never_share_a_journal(tmp_path):
    """The second `scanbench run` with the first one's --out (and --force) is refused
    while the first runs; the first finishes with its own journal and results."""
    from scanbench.execution.journal import journal_path, read_journal

    out = tmp_path / "run.json"
    common = ["run", "--scenario-file", TOY, "--size", "smoke", "--min-time", "0.01"]
    common += ["--max-time", "0.1", "--out", str(out), "--quiet", "--no-probes", "--no-overlap"]
    command = [sys.executable, "-m", "scanbench.cli.main", *common]
    first = subprocess.Popen(
        [*command, "--backend", "good", "--backend", "hang", "--timeout", "300"],
        stderr=subprocess.PIPE,
        text=True,
    )
    journal = journal_path(out)
    deadline = time.monotonic() + 120
    while not (journal.exists() and read_journal(journal)[2]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert journal.exists(), "the first run did not start"
    header = journal.read_text().splitlines()[0]
    second = subprocess.run(
        [*command, "--backend", "good", "--force"], capture_output=True, text=True, timeout=300
    )
    assert first.poll() is None, "the first run ended before the second was tried"
    assert second.returncode == 2, second.stderr
    (line,) = second.stderr.strip().splitlines()
    assert "another scanbench run is writing to it now" in line
    assert journal.read_text().splitlines()[0] == header  # the first's journal, untouched
    first.send_signal(signal.SIGINT)
    first.communicate(timeout=120)
    assert [r.backend for r in read_journal(journal)[2]] == ["good"]


def test_settings_given_beside_resume_are_refused_not_ignored(tmp_path, capsys):
    """`--resume` takes the run's stored settings: a --backend or --max-time given with it
    was silently ignored (the run resumed every cell with its own). Refused in one line,
    naming them, before anything runs or is written."""
    from scanbench.cli.main import main

    out = tmp_path / "run.json"
    out.write_text((DATA / "toy-failed.json").read_text())
    before = out.read_bytes()
    assert main(["run", "--resume", str(out), "--backend", "nope", "--max-time", "1"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--backend, --max-time cannot be given with it" in line
    assert out.read_bytes() == before

"""A run's shards as jobs: ``scanbench run --executor slurm|local --shards N``.

Through submitit (``AutoExecutor``): on SLURM, one job array with one task per shard,
each task alone on a node (``--exclusive``); with the local executor, the same tasks as
subprocesses of this machine, one shard at a time (timed cells never share a machine).
Each task runs one shard (`run_shard`: `scanbench.execution.runner` on the shard's plan)
and writes the shard's results file into the jobs folder (``<out>.jobs/``, which on
SLURM must be on a file system the nodes share). The submitting process waits with a
progress line (shards done, cells done, the queue's states), then the caller gathers
the shards (`scanbench.execution.gathering`).

Nothing depends on the submitting process staying alive: the jobs file
(``<out>.jobs.json``, rewritten atomically after every submission) holds each shard's
plan, file and job id, so ``scanbench run --resume <out>`` picks the jobs up by their
ids (``submitit``'s job objects re-attached to the folder), waits for those still
running, resubmits a shard whose job ended before its shard was complete (the task
resumes the shard from its journal, or, on another node, starts it afresh and keeps the
earlier file beside it), and submits the shards never submitted.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import socket
import sys
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..api import InputError, StoreError
from ..extras import MissingExtraError, available, missing_line, require
from ..ownership import check_owned
from ..safe_files import write_json_atomic
from ..stored_json import parse_json
from .interrupts import Interrupted, signals_raise
from .journal import journal_path, read_journal

EXECUTORS = ("local", "slurm")
JOBS_VERSION = 1
POLL_S = {"local": 2.0, "slurm": 30.0}
# the [slurm] table of --slurm-config: key -> (type, what it is); the command-line
# options --partition, --time-limit and --gpus-per-node override the first three
SLURM_KEYS: dict[str, tuple[type | tuple[type, ...], str]] = {
    "partition": (str, "the partition (sbatch --partition)"),
    "time_limit": (int, "minutes before SLURM ends a shard's job (sbatch --time)"),
    "gpus_per_node": (int, "GPUs of each shard's node (sbatch --gpus-per-node)"),
    "account": (str, "sbatch --account"),
    "qos": (str, "sbatch --qos"),
    "constraint": (str, "node features (sbatch --constraint)"),
    "cpus_per_task": (int, "sbatch --cpus-per-task"),
    "mem_gb": ((int, float), "memory per node, GB (sbatch --mem)"),
    "setup": (list, "shell lines run before the task (module load ..., source venv)"),
    "exclusive": (bool, "a node of its own per shard (default true)"),
    "array_parallelism": (int, "at most this many shards at once (default: all)"),
}


@dataclasses.dataclass(frozen=True)
class SlurmSettings:
    """How shards are submitted (see `SLURM_KEYS`); the local executor reads only the
    time limit and the GPUs."""

    partition: str | None = None
    time_limit: int | None = None
    gpus_per_node: int | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    cpus_per_task: int | None = None
    mem_gb: float | None = None
    setup: tuple[str, ...] = ()
    exclusive: bool = True
    array_parallelism: int | None = None


def slurm_settings(path: str | None, **given: Any) -> SlurmSettings:
    """The ``[slurm]`` table of a TOML file, then the options given (not None).

    Raises:
        InputError: an unreadable file, an unknown key or a value of the wrong type,
            naming the key and the allowed ones.
    """
    table: dict[str, Any] = {}
    if path is not None:
        try:
            with open(path, "rb") as handle:
                data = tomllib.load(handle)
        except OSError as error:
            raise InputError(
                f"--slurm-config {path!r}: cannot read it ({error.strerror})"
            ) from None
        except tomllib.TOMLDecodeError as error:
            raise InputError(f"--slurm-config {path!r}: not valid TOML ({error})") from None
        table = data.get("slurm", {})
        if not isinstance(table, dict):
            raise InputError(f"--slurm-config {path!r}: [slurm] must be a table")
        for key, value in table.items():
            if key not in SLURM_KEYS:
                raise InputError(
                    f"--slurm-config {path!r}: unknown key [slurm] {key}; choose from "
                    + ", ".join(SLURM_KEYS)
                )
            kind, what = SLURM_KEYS[key]
            wrong_bool = isinstance(value, bool) and kind is not bool
            if not isinstance(value, kind) or wrong_bool:
                raise InputError(
                    f"--slurm-config {path!r}: [slurm] {key} must be a "
                    f"{getattr(kind, '__name__', 'number')} ({what}), got {value!r}"
                )
        if not all(isinstance(line, str) for line in table.get("setup", [])):
            raise InputError(f"--slurm-config {path!r}: [slurm] setup must list strings")
    merged = {**table, **{key: value for key, value in given.items() if value is not None}}
    for key in ("time_limit", "gpus_per_node", "cpus_per_task", "array_parallelism"):
        if merged.get(key) is not None and merged[key] < (0 if key == "gpus_per_node" else 1):
            raise InputError(f"[slurm] {key} must be >= 1, got {merged[key]}")
    merged["setup"] = tuple(merged.get("setup", ()))
    return SlurmSettings(**merged)


def time_limit(settings: SlurmSettings, expected_s: Sequence[float]) -> int:
    """Minutes a shard's job may run: as set, else three times the longest shard's
    expected seconds plus 30 minutes (the cost model can be far off for a cell never
    measured: give ``--shard-costs`` or ``--time-limit``)."""
    if settings.time_limit is not None:
        return settings.time_limit
    return math.ceil(3 * max(expected_s, default=0.0) / 60) + 30


def executor_parameters(
    settings: SlurmSettings, count: int, run_id: str, minutes: int
) -> dict[str, Any]:
    """``AutoExecutor.update_parameters`` keywords: one task on one node per shard."""
    parameters: dict[str, Any] = {
        "name": f"scanbench-{run_id}",
        "timeout_min": minutes,
        "nodes": 1,
        "tasks_per_node": 1,
        "slurm_array_parallelism": settings.array_parallelism or count,
    }
    if settings.gpus_per_node is not None:
        parameters["gpus_per_node"] = settings.gpus_per_node
    if settings.cpus_per_task is not None:
        parameters["cpus_per_task"] = settings.cpus_per_task
    if settings.mem_gb is not None:
        parameters["mem_gb"] = float(settings.mem_gb)
    for key in ("partition", "account", "qos", "constraint"):
        if getattr(settings, key) is not None:
            parameters[f"slurm_{key}"] = getattr(settings, key)
    if settings.exclusive:
        parameters["slurm_exclusive"] = True
    if settings.setup:
        parameters["slurm_setup"] = list(settings.setup)
    return parameters


# ---------------------------------------------------------------- the jobs file


@dataclasses.dataclass(frozen=True)
class ShardJob:
    """One shard of a submitted run: its plan (the shard's invocation, as its results
    file stores it: `scanbench.invocation.Invocation.to_json`), its results file, and its
    job id once submitted."""

    index: int
    out: str
    invocation: Mapping[str, Any]
    job_id: str | None = None

    @property
    def cells(self) -> int:
        return len(self.invocation.get("cells") or [])


@dataclasses.dataclass(frozen=True)
class Jobs:
    """A submitted run (``<out>.jobs.json``): enough to pick its jobs up from another
    process."""

    executor: str
    folder: str
    out: str
    reports: tuple[str | None, str | None]  # --md, --html of the gathered run
    run_id: str
    cwd: str
    minutes: int
    parameters: Mapping[str, Any]
    shards: tuple[ShardJob, ...]

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        return {"jobs_version": JOBS_VERSION, **data}

    @classmethod
    def from_json(cls, data: Any, where: str) -> Jobs:
        if not isinstance(data, dict) or data.get("jobs_version") != JOBS_VERSION:
            raise StoreError(f"{where}: not a scanbench jobs file of version {JOBS_VERSION}")
        try:
            shards = tuple(ShardJob(**shard) for shard in data["shards"])
            return cls(
                data["executor"],
                data["folder"],
                data["out"],
                tuple(data["reports"]),
                data["run_id"],
                data["cwd"],
                int(data["minutes"]),
                dict(data["parameters"]),
                shards,
            )
        except (KeyError, TypeError, ValueError) as error:
            raise StoreError(f"{where}: malformed jobs file ({error})") from None


def jobs_path(out: str | os.PathLike[str]) -> Path:
    """Where a submitted run keeps its jobs: ``<out>.jobs.json``."""
    path = Path(out)
    return path.with_name(path.name + ".jobs.json")


def jobs_folder(out: str | os.PathLike[str]) -> Path:
    """The folder of a submitted run's jobs (``<out>.jobs/``), made with mode 0700 when
    new: submitit keeps each job's pickled function there, which the job loads and runs.

    Raises:
        InputError: it is a link, another user's, or writable by group or others
            (`scanbench.ownership.check_owned`).
    """
    path = Path(out)
    folder = path.with_name(path.name + ".jobs")
    try:
        folder.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        pass  # an earlier submission's: checked below like a new one
    except OSError as error:
        raise InputError(f"cannot make the jobs folder {str(folder)!r}: {error.strerror}") from None
    return check_owned(folder, "the jobs folder")


def read_jobs(out: str | os.PathLike[str]) -> Jobs:
    """The jobs file of ``out``, when it and the folders it names are this user's.

    The jobs file names the folder whose pickles the jobs load and the directory they
    import the user's code from (``cwd``): a file or folder someone else could have
    written would let them choose that code. So the file, the jobs folder and ``cwd`` are
    checked (`scanbench.ownership.check_owned`) before anything is picked up.

    Raises:
        StoreError: a file that is not a jobs file.
        InputError: the file, its jobs folder or its ``cwd`` is a link, another user's,
            or writable by group or others.
    """
    path = jobs_path(out)
    if path.exists() or path.is_symlink():
        check_owned(path, "the jobs file", directory=False)
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise StoreError(f"{path}: cannot read the jobs file ({error.strerror})") from None
    data = parse_json(raw, f"{path} (the jobs file)")
    jobs = Jobs.from_json(data, str(path))
    check_owned(jobs.folder, f"{path}: the jobs folder")
    check_owned(jobs.cwd, f"{path}: the working directory (cwd)")
    return jobs


def save_jobs(jobs: Jobs) -> None:
    write_json_atomic(jobs_path(jobs.out), jobs.to_json())


# ---------------------------------------------------------------- a shard's task


def cells_done(out: str | os.PathLike[str]) -> int:
    """Cells a shard has saved so far (its journal while it runs, else its file)."""
    from ..results import load_run

    path = Path(out)
    try:
        if journal_path(path).exists():
            return len({record.key for record in read_journal(journal_path(path))[2]})
        if path.exists():
            return len({record.key for record in load_run(path).records})
    except StoreError:
        return 0
    return 0


def complete(shard: ShardJob) -> bool:
    """The shard's file holds every cell and no journal is left (it finished)."""
    path = Path(shard.out)
    return path.exists() and not journal_path(path).exists() and cells_done(path) >= shard.cells


def run_shard(invocation: Mapping[str, Any], out: str, cwd: str) -> int:
    """The task of one shard, on its node: run the shard's plan into ``out``. A shard
    interrupted on this host resumes from its journal; one started on another host is
    moved aside (``<out>.from-<host>``, kept) and run afresh here, so that a shard file
    holds one machine's cells. Returns the number of failed cells."""
    from ..import_path import use_import_root
    from ..invocation import Invocation
    from .runner import load_interrupted, resume
    from .runner import run as run_invocation

    os.chdir(cwd)
    use_import_root()  # a scenario file imports the user's code as `scanbench run` would
    path = Path(out)
    if path.exists() or journal_path(path).exists():
        host = load_interrupted(path)[0].get("hostname")
        if host == socket.gethostname():
            measured = resume(path)
            return sum(1 for record in measured.records if record.status == "failed")
        print(
            f"scanbench: {path} was started on {host}: kept aside, run afresh here", file=sys.stderr
        )
        for old in (path, journal_path(path)):
            if old.exists():
                old.rename(old.with_name(f"{old.name}.from-{host}"))
    measured = run_invocation(Invocation.from_json(invocation), path)
    return sum(1 for record in measured.records if record.status == "failed")


# ---------------------------------------------------------------- submitting and waiting


SUBMITTED = "jobs submitted with --executor"  # what needs submitit (the `slurm` extra)


def check_submitit() -> None:
    """Refuse ``--executor`` without submitit, in the one line naming its extra.

    Raises:
        MissingExtraError: submitit is not installed.
    """
    if not available("submitit"):
        raise MissingExtraError(missing_line("submitit", SUBMITTED))


def check_available(executor: str) -> None:
    """Refuse, before anything is written, any executor without submitit (the `slurm`
    extra) and ``slurm`` where SLURM is not installed.

    Raises:
        InputError: with the extra to install, or where to submit from instead.
    """
    check_submitit()
    if executor == "slurm" and shutil.which("sbatch") is None:
        raise InputError(
            "--executor slurm: SLURM's sbatch is not on this machine's PATH; submit from a "
            "login node of the cluster, or use --executor local"
        )


def _executor(jobs: Jobs):
    """submitit's executor for the jobs' folder and parameters.

    Raises:
        InputError: ``slurm`` where SLURM is not installed.
    """
    submitit = require("submitit", SUBMITTED)

    check_available(jobs.executor)
    try:
        executor = submitit.AutoExecutor(folder=jobs.folder, cluster=jobs.executor)
    except RuntimeError as error:
        raise InputError(f"--executor {jobs.executor}: {error}") from None
    executor.update_parameters(**jobs.parameters)
    return executor


def _attach(jobs: Jobs, job_id: str):
    """A submitted job, picked up by its id (another process submitted it)."""
    submitit = require("submitit", SUBMITTED)

    kind = submitit.SlurmJob if jobs.executor == "slurm" else submitit.LocalJob
    return kind(folder=jobs.folder, job_id=job_id)


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def _state(jobs: Jobs, job, attached: bool) -> str:
    """RUNNING, PENDING, COMPLETED, FAILED... (a picked-up local job: by its pid)."""
    if attached and jobs.executor == "local":
        return "RUNNING" if _alive(job.job_id) else "FINISHED"
    try:
        return str(job.state)
    except Exception as error:  # sacct may fail: the state is only shown
        return f"UNKNOWN ({type(error).__name__})"


def _done(jobs: Jobs, job, attached: bool) -> bool:
    if attached and jobs.executor == "local":
        return not _alive(job.job_id)
    return job.done()


def _log_tail(job) -> str:
    """The last non-empty line of a job's stderr (then stdout), for a one-line reason."""
    for name in ("stderr", "stdout"):
        try:
            text = getattr(job, name)() or ""
        except Exception:  # an unreadable log is no reason to fail
            text = ""
        lines = [line for line in text.splitlines() if line.strip()]
        if lines:
            return lines[-1].strip()[:200]
    return "no log"


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What waiting for the jobs gave: the shards complete, and each failed shard with
    its job id and the last line of its log."""

    complete: tuple[int, ...]
    failed: tuple[tuple[int, str, str], ...]


def progress_line(jobs: Jobs, states: Mapping[int, str]) -> str:
    """``shards 1/3 done, cells 7/12, queue: 1 RUNNING, 1 PENDING``."""
    done = sum(1 for shard in jobs.shards if complete(shard))
    cells = sum(min(cells_done(shard.out), shard.cells) for shard in jobs.shards)
    total = sum(shard.cells for shard in jobs.shards)
    counted: dict[str, int] = {}
    for state in states.values():
        counted[state] = counted.get(state, 0) + 1
    queue = ", ".join(f"{n} {state}" for state, n in sorted(counted.items())) or "-"
    return f"shards {done}/{len(jobs.shards)} done, cells {cells}/{total}, queue: {queue}"


class Detached(Interrupted):
    """The submitting process was stopped; the jobs go on (the message says how to
    pick them up)."""

    def __init__(self, signum: int, jobs: Jobs) -> None:
        super().__init__(signum)
        ids = ", ".join(s.job_id for s in jobs.shards if s.job_id) or "none yet"
        what = (
            "the SLURM jobs go on"
            if jobs.executor == "slurm"
            else "a local job stopped by the same signal is resubmitted and resumes its shard"
        )
        self.args = (
            f"interrupted: {what} (job ids: {ids}); pick them up with "
            f"`scanbench run --resume {jobs.out}`",
        )


def drive(
    jobs: Jobs,
    say: Callable[[str], None],
    poll_s: float | None = None,
    pick_up: bool = False,
) -> Outcome:
    """Submit what is not submitted, wait for every shard (see the module doc), saying
    the progress line each time it changes.

    Raises:
        Detached: on SIGINT or SIGTERM; the jobs file says how to pick the jobs up.
    """
    poll = POLL_S[jobs.executor] if poll_s is None else poll_s
    executor = _executor(jobs)
    handles: dict[int, tuple[Any, bool]] = {}  # index -> (job, picked up by id)
    failed: list[tuple[int, str, str]] = []
    last = ""

    def record(index: int, job_id: str) -> None:
        nonlocal jobs
        shards = [
            dataclasses.replace(s, job_id=job_id) if s.index == index else s for s in jobs.shards
        ]
        jobs = dataclasses.replace(jobs, shards=tuple(shards))
        save_jobs(jobs)

    def show() -> None:
        nonlocal last
        states = {i: _state(jobs, job, attached) for i, (job, attached) in handles.items()}
        line = progress_line(jobs, states)
        if line != last:
            say(line)
            last = line

    def wait_for(indices: Sequence[int]) -> None:
        waiting = set(indices)
        while waiting:
            show()
            for index in sorted(waiting):
                job, attached = handles[index]
                if _done(jobs, job, attached):
                    waiting.discard(index)
                    shard = next(s for s in jobs.shards if s.index == index)
                    if not complete(shard):
                        failed.append((index, job.job_id, _log_tail(job)))
            if waiting:
                time.sleep(poll)
        show()

    def submit(todo: Sequence[ShardJob]) -> None:
        args = ([s.invocation for s in todo], [s.out for s in todo], [jobs.cwd] * len(todo))
        submitted = executor.map_array(run_shard, *args)
        for shard, job in zip(todo, submitted, strict=True):
            handles[shard.index] = (job, False)
            record(shard.index, job.job_id)
            say(f"shard {shard.index}/{len(jobs.shards)}: submitted as job {job.job_id}")

    try:
        with signals_raise():
            running = []
            for shard in jobs.shards if pick_up else ():
                if not shard.job_id:
                    continue
                said = f"shard {shard.index}/{len(jobs.shards)}: job {shard.job_id} picked up"
                if complete(shard):
                    say(f"{said}: its shard is complete")
                    continue
                job = _attach(jobs, shard.job_id)
                if _done(jobs, job, True):
                    say(f"{said}: it ended before its shard was complete; resubmitting it")
                    continue
                handles[shard.index] = (job, True)
                running.append(shard.index)
                say(f"{said}: {_state(jobs, job, True)}")
            if jobs.executor == "local":  # one shard at a time: never two timed at once
                wait_for(running)
                failed.clear()  # a picked-up job that ended early: resubmitted below
                for shard in [s for s in jobs.shards if not complete(s)]:
                    submit([shard])
                    wait_for([shard.index])
            else:  # SLURM: every shard not running nor complete in one array, then all
                todo = [s for s in jobs.shards if not complete(s) and s.index not in running]
                if todo:
                    submit(todo)
                wait_for(running + [s.index for s in todo])
    except Interrupted as stop:
        raise Detached(stop.signum, jobs) from None
    done = tuple(s.index for s in jobs.shards if complete(s))
    return Outcome(done, tuple(failed))

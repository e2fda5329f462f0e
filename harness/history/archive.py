"""The history store: one plain JSON file per added run, never rewritten.

A history directory (default ``results/history/``) holds one entry
(`scanbench.history.entry`) per run added with ``scanbench history add``. An entry's file
name is ``<commit sha, 12>-<run id, 16>.json``, the run id being the SHA-256 of the run's
canonical JSON: adding the same run again finds its entry and writes nothing (its
machine and branch stay as first added). A new file is written beside its final name and
linked into place (``link(2)`` fails when the name exists), so nothing stored is ever
replaced, and a crash leaves at most a hidden temporary file. A name taken by anything but
this run's entry (another file, a truncated one, a link, a FIFO) is left as it is and the
run is skipped with the reason. Plain files only (entries are read without following a
link or waiting on a FIFO): the directory can live on a branch or travel between CI jobs
as an artefact, and two jobs adding to copies of it merge by copying files.

A pytest-benchmark JSON file (``pytest --benchmark-json``, best written with the
``scanbench`` fixture) is added the same way, one cell per test
(`scanbench.history.pytest_json`).

A run measured on a tree with uncommitted changes is not history (its commit is not what
ran); a results file that cannot be read, or a file in the directory that is not an entry,
is named with the reason and skipped, never fatal to the rest.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..api import Record, StoreError
from ..credentials import public_url
from ..gathered import by_kind
from ..results import Run, load_run
from ..safe_files import not_regular, write_json_new
from ..stored_json import parse_json
from .entry import SHA, CellPoint, Commit, Entry, Machine, Setup
from .pytest_json import entry_of_pytest, is_pytest_benchmark

DEFAULT_DIRECTORY = "results/history"
NUMBERED = re.compile(r"\.\d+$")  # XLA's instruction numbers: ``fusion.97`` is a ``fusion``

# ---------------------------------------------------------------- from a run


def run_id(run: Run) -> str:
    """SHA-256 of the run's canonical JSON (key order and spacing do not matter)."""
    text = json.dumps(run.to_json(), sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def commit_of(environment: Mapping[str, Any]) -> tuple[Commit, str | None]:
    """The project commit and branch a run recorded (``git``, else the older
    ``git_commit`` sha alone).

    Raises:
        StoreError: no commit recorded, or the tree had uncommitted changes (the commit
            is not what was measured).
    """
    git = environment.get("git")
    if isinstance(git, dict) and isinstance(git.get("commit"), str):
        sha, dirty = git["commit"], bool(git.get("dirty"))
        branch = git.get("branch") if git.get("branch") != "HEAD" else None  # detached
        parents = tuple(git.get("parents") or ())
        commit = Commit(
            sha,
            git.get("date"),
            git.get("subject") or "",
            parents,
            public_url(git.get("remote")) or None,
        )
    elif isinstance(environment.get("git_commit"), str):
        raw = environment["git_commit"]
        sha, dirty, branch = raw.removesuffix("-dirty"), raw.endswith("-dirty"), None
        commit = Commit(sha)
    else:
        raise StoreError(
            "no git commit recorded (environment.git): run scanbench inside the project's "
            "git work tree"
        )
    if not SHA.match(sha):
        raise StoreError(f"environment.git.commit is not a sha: {sha!r:.60}")
    if dirty:
        raise StoreError(
            f"measured with uncommitted changes on {sha[:12]} (environment.git.dirty): the "
            "commit is not what ran; commit the changes and run again"
        )
    return commit, branch


def _kinds(parts: Mapping[str, float]) -> dict[str, float]:
    """A breakdown summed over XLA's instruction numbers (they change between builds)."""
    out: dict[str, float] = {}
    for name, value in parts.items():
        kind = NUMBERED.sub("", name)
        out[kind] = out.get(kind, 0.0) + value
    return out


def cell_point(record: Record, source: str = "") -> CellPoint:
    """What the history keeps of one record (``source``: its scenario's)."""
    stats = record.stats if record.status == "ok" else {}
    per_call = record.counts.per_call() if record.status == "ok" else {}
    return CellPoint(
        scenario=record.scenario,
        backend=record.backend,
        size=record.size,
        dtype=record.dtype,
        status=str(record.status),
        params=tuple(sorted(record.params.items())),
        devices=record.devices,
        seed=record.seed,
        error=record.error,
        median=stats.get("median"),
        ci_low=stats.get("ci_low"),
        ci_high=stats.get("ci_high"),
        confidence=stats.get("confidence"),
        samples=len(record.samples_s),
        disturbed=record.disturbed,
        counts={key: float(value) for key, value in per_call.items() if value is not None},
        breakdowns={
            name: _kinds(parts)
            for name, parts in (record.counts.breakdowns() if per_call else {}).items()
        },
        source=source,
        cache=getattr(record, "cache", "warm"),  # warm and cold caches are timed apart
    )


def entry_of(run: Run, source: str, machine: str | None = None, branch: str | None = None) -> Entry:
    """The history entry of a run; ``machine`` and ``branch`` replace what it recorded.

    Raises:
        StoreError: the run has no commit, or was measured on a dirty tree.
    """
    env = run.environment
    commit, recorded_branch = commit_of(env)
    versions = env.get("versions") or {}
    return Entry(
        run_id=run_id(run),
        commit=commit,
        branch=branch or recorded_branch,
        machine=Machine(
            name=machine or env.get("hostname") or "unknown",
            hostname=env.get("hostname"),
            cpu_model=env.get("cpu_model"),
            cpu_count=env.get("cpu_count"),
            platform=env.get("platform"),
            device_kind=env.get("device_kind"),
            device_count=env.get("device_count"),
        ),
        setup=Setup(
            versions.get("jax"),
            versions.get("jaxlib"),
            env.get("xla_flags") or "",
            env.get("x64_default"),
        ),
        measured_at=env.get("timestamp"),
        source=source,
        cells=tuple(cell_point(record, _source(run, record.scenario)) for record in run.records),
    )


def _source(run: Run, scenario: str) -> str:
    try:
        facts = run.scenarios.get(scenario)
    except TypeError:  # stored facts of another shape: the source is only a convenience
        return ""
    return facts.source if facts is not None else ""


# ---------------------------------------------------------------- the directory


class Outcome(enum.StrEnum):
    ADDED = "added"
    PRESENT = "already in the history"
    SKIPPED = "skipped"


@dataclasses.dataclass(frozen=True)
class Added:
    """What `add` did with one results file: ``detail`` is the entry's file, or why the
    file was skipped."""

    path: str
    outcome: Outcome
    detail: str
    entry: Entry | None = None


def read_entry(path: str | os.PathLike[str]) -> Entry:
    """The entry stored at ``path``, read without following a symbolic link or waiting on
    a FIFO (``O_NOFOLLOW | O_NONBLOCK``, regular files only).

    Raises:
        StoreError: why the file is not an entry.
    """
    try:
        why = not_regular(os.lstat(path).st_mode)
        if why:
            raise StoreError(why)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            why = not_regular(os.fstat(handle.fileno()).st_mode)  # replaced meanwhile
            if why:
                raise StoreError(why)
            raw = handle.read()
    except OSError as error:
        raise StoreError(_reason(error)) from None
    return Entry.from_json(parse_json(raw, ""))  # the caller names the file


def _entries_of_file(path: str, machine: str | None, branch: str | None) -> list[Entry]:
    """`entry_of` a results file, checked to read back as it is written: one entry per
    machine kind of a run gathered from shards (`scanbench.gathered.by_kind`: machines
    of different kinds are kept apart, never averaged), else one.

    Raises:
        StoreError: the file is not a regular file (a FIFO would block the read), not a
            run, not history, or its entry would not read back.
    """
    try:
        why = not_regular(os.stat(path).st_mode)
    except OSError:
        why = None  # `load_run` says why it cannot be read
    if why:
        raise StoreError(why)
    pytest_data = _pytest_benchmark(path)
    if pytest_data is not None:  # a pytest user's --benchmark-json (history.pytest_json)
        entries = [entry_of_pytest(pytest_data, Path(path).name, machine, branch)]
    else:
        runs = by_kind(load_run(path))
        entries = [entry_of(run, Path(path).name, machine, branch) for run in runs]
    for entry in entries:
        try:
            Entry.from_json(json.loads(json.dumps(entry.to_json(), allow_nan=False)))
        except ValueError:  # json refuses NaN and infinity
            raise StoreError("a stored number is not finite") from None
        except StoreError as error:
            raise StoreError(f"its entry would not read back: {error}") from None
    return entries


def _pytest_benchmark(path: str) -> dict[str, Any] | None:
    """The parsed file when it is pytest-benchmark JSON, else None (`load_run` then reads
    it, and says why when it is neither)."""
    try:
        with open(path, "rb") as handle:  # a regular file: checked by the caller
            data = parse_json(handle.read(), path)  # depth and size bounded
    except (OSError, StoreError):
        return None
    return data if is_pytest_benchmark(data) else None


def add(
    paths: Sequence[str | os.PathLike[str]],
    directory: str | os.PathLike[str],
    machine: str | None = None,
    branch: str | None = None,
) -> list[Added]:
    """Add each results file to the history (see the module doc); a file that cannot be
    read or is not history (no commit, a dirty tree) is skipped with the reason, and so
    is a run whose entry's name is taken by anything but that run's entry (never
    replaced). A run already stored is `Outcome.PRESENT` with the stored entry (its
    machine and branch as first added: ``machine`` and ``branch`` do not rename it)."""
    root = Path(directory)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise StoreError(
            f"--history {root}: cannot create the directory ({error.strerror})"
        ) from None
    if not root.is_dir():
        raise StoreError(f"--history {root}: not a directory")
    done = []
    for path in map(str, paths):
        try:
            entries = _entries_of_file(path, machine, branch)
        except StoreError as error:
            reason = str(error).removeprefix(f"{path}: ")
            done.append(Added(path, Outcome.SKIPPED, reason))
            continue
        done += [_add_entry(root, path, entry) for entry in entries]
    return done


def _add_entry(root: Path, path: str, entry: Entry) -> Added:
    """Store one entry of the results file ``path`` (see `add`)."""
    target = root / entry.filename
    try:
        written = write_json_new(target, entry.to_json())
    except OSError as error:
        return Added(path, Outcome.SKIPPED, f"cannot write {target} ({error})")
    if written:
        return Added(path, Outcome.ADDED, str(target), entry)
    try:
        stored = read_entry(target)
        why = "" if stored.run_id == entry.run_id else f"it holds run {stored.run_id[:16]}"
    except StoreError as error:
        why = str(error)
    if why:
        reason = f"{target} exists and is not this run's entry ({why}); left as it is"
        return Added(path, Outcome.SKIPPED, reason)
    return Added(path, Outcome.PRESENT, str(target), stored)


@dataclasses.dataclass(frozen=True)
class History:
    """Every entry read from a history directory, and the files skipped (with why)."""

    entries: tuple[Entry, ...]
    skipped: tuple[tuple[str, str], ...]


def load(directory: str | os.PathLike[str]) -> History:
    """Read every entry of a history directory (hidden files, such as an interrupted
    write's temporary file, are ignored; any other file that is not an entry, including
    a symbolic link or a FIFO, is named in ``skipped`` with the reason). Two entries of
    one run (copied under another name) count once.

    Raises:
        StoreError: the directory does not exist, or is not a directory.
    """
    root = Path(directory)
    if not root.is_dir():
        if root.exists():
            raise StoreError(f"--history {root}: not a directory; give the history directory")
        raise StoreError(
            f"--history {root}: no such directory; add runs with `scanbench history add "
            f"RESULTS --history {root}`"
        )
    entries: dict[str, Entry] = {}
    skipped = []
    for path in sorted(root.iterdir()):
        if path.name.startswith("."):
            continue
        if path.suffix != ".json":
            skipped.append((str(path), "not a history entry (not a .json file)"))
            continue
        try:
            entry = read_entry(path)
        except StoreError as error:
            skipped.append((str(path), str(error)))
            continue
        entries.setdefault(entry.run_id, entry)
    return History(tuple(entries.values()), tuple(skipped))


def _reason(error: OSError) -> str:
    return f"cannot read ({error.strerror})"

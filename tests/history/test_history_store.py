"""The history store: one file per run, keyed by commit, branch, machine and environment;
the same run twice is stored once; nothing stored is rewritten; a corrupt or foreign file
is named and skipped, never fatal."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scanbench.api import StoreError
from scanbench.cli.main import main
from scanbench.history import archive, changes, dashboard, series, summary
from scanbench.history.entry import HISTORY_VERSION, Commit, Entry, Setup
from scanbench.results import write_run
from tests.history.test_history_changes import commit_facts, sha, synthetic_run


def run_at(index: int, machine: str = "ci-box", **git):
    return synthetic_run(index, machine, np.random.default_rng(index), **git)


def test_an_entry_is_keyed_by_commit_branch_machine_and_environment(tmp_path):
    path = write_run(tmp_path / "run.json", run_at(3))
    (added,) = archive.add([path], tmp_path / "history")
    assert added.outcome == archive.Outcome.ADDED
    entry = added.entry
    assert entry.commit == Commit(
        sha(3), commit_facts(3)["date"], "change 3", (sha(2),), "git@github.com:example/project.git"
    )
    assert entry.branch == "main"
    assert entry.machine.key == ("ci-box", "AMD EPYC 7763", 2, "cpu", "cpu", 1)
    assert entry.setup == Setup("0.10.2", "0.10.2", "", False)
    assert {cell.label for cell in entry.cells} >= {"mppi/vmapped/smoke/float32"}
    (cell,) = [c for c in entry.cells if c.label == "mppi/vmapped/smoke/float32"]
    assert cell.counts["dispatches"] == 1 and cell.ci_low < cell.median < cell.ci_high
    assert cell.breakdowns["kernels_by_op"] == {"jit_f/fusion": 4.0}  # numbers merged
    stored = json.loads((tmp_path / "history" / entry.filename).read_text())
    assert stored["history_version"] == HISTORY_VERSION
    assert Entry.from_json(stored) == entry
    assert entry.filename == f"{sha(3)[:12]}-{entry.run_id[:16]}.json"


def test_the_same_run_twice_is_stored_once_and_never_rewritten(tmp_path):
    path = write_run(tmp_path / "run.json", run_at(1))
    copy = tmp_path / "copy.json"  # the same run, formatted differently
    copy.write_text(json.dumps(json.loads(path.read_text()), indent=4, sort_keys=True))
    (first,) = archive.add([path], tmp_path / "history")
    target = tmp_path / "history" / first.entry.filename
    before = (target.read_bytes(), target.stat().st_ino, target.stat().st_mtime_ns)
    again = archive.add([path, copy], tmp_path / "history", machine="renamed")
    assert [a.outcome for a in again] == [archive.Outcome.PRESENT] * 2
    assert (target.read_bytes(), target.stat().st_ino, target.stat().st_mtime_ns) == before
    assert len(list((tmp_path / "history").iterdir())) == 1


def test_a_name_taken_by_anything_is_never_replaced(tmp_path):
    target = tmp_path / "entry.json"
    os.mkfifo(target)
    assert archive.write_json_new(target, {"x": 1}) is False  # no open(): a FIFO would block
    assert target.is_fifo()
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "elsewhere.json")
    assert archive.write_json_new(link, {"x": 1}) is False
    assert not (tmp_path / "elsewhere.json").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_bad_files_are_named_and_skipped_and_the_others_added(tmp_path, capsys):
    good = write_run(tmp_path / "good.json", run_at(2))
    dirty = write_run(tmp_path / "dirty.json", run_at(4, dirty=True))
    bare = run_at(5)
    bare = dataclasses.replace(
        bare,
        environment={k: v for k, v in bare.environment.items() if k not in ("git", "git_commit")},
    )
    nogit = write_run(tmp_path / "nogit.json", bare)
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"schema_version": 1, "environment": {')
    foreign = tmp_path / "package.json"
    foreign.write_text('{"name": "left-pad"}')
    paths = [str(p) for p in (corrupt, dirty, good, nogit, foreign, tmp_path / "missing.json")]
    code = main(["history", "add", *paths, "--history", str(tmp_path / "h")])
    out, err = capsys.readouterr()
    assert code == 1
    assert out.startswith(f"added: {good} -> ")
    lines = err.strip().splitlines()
    assert len(lines) == 5
    assert lines[0].startswith(f"skipped {corrupt}: not valid JSON (line 1")
    assert "uncommitted changes" in lines[1] and "environment.git.dirty" in lines[1]
    assert "no git commit recorded" in lines[2]
    assert "not a scanbench results file" in lines[3]
    assert "cannot read" in lines[4]
    assert len(list((tmp_path / "h").iterdir())) == 1


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (b'\xff\xfe{"schema_version": 1}', "not UTF-8 (byte 0: invalid start byte)"),
        (b"[" * 100_000 + b"]" * 100_000, "nested deeper than 64 levels"),
        (b'{"schema_version": 1, "x": ' + b"9" * 5000 + b"}", "an integer longer than"),
    ],
    ids=["not-utf8", "deep", "huge-integer"],
)
def test_a_file_that_crashed_the_reader_is_skipped_and_the_next_one_added(
    tmp_path, capsys, text, reason
):
    """`history add a bad c`: before, `a` was added, then a traceback (exit 70) and `c`
    was never added. Now `bad` is named and skipped and `c` added (exit 1)."""
    first = write_run(tmp_path / "a.json", run_at(1))
    bad = tmp_path / "bad.json"
    bad.write_bytes(text)
    last = write_run(tmp_path / "c.json", run_at(2))
    code = main(
        ["history", "add", str(first), str(bad), str(last), "--history", str(tmp_path / "h")]
    )
    out, err = capsys.readouterr()
    assert code == 1
    assert [line.split(":")[0] for line in out.splitlines()] == ["added", "added"]
    assert err.startswith(f"skipped {bad}: {reason}") and len(err.splitlines()) == 1, err
    assert len(list((tmp_path / "h").iterdir())) == 2 and bad.read_bytes() == text


def test_the_machine_and_branch_can_be_named_and_a_detached_head_has_no_branch(tmp_path):
    path = write_run(tmp_path / "run.json", run_at(1, branch="HEAD"))
    (plain,) = archive.add([path], tmp_path / "a")
    assert plain.entry.branch is None and plain.entry.machine.name == "ci-box"
    (named,) = archive.add([path], tmp_path / "b", machine="gha-ubuntu-x64", branch="main")
    assert named.entry.branch == "main"
    assert named.entry.machine.name == "gha-ubuntu-x64"
    assert named.entry.machine.hostname == "ci-box"


def test_an_older_run_with_only_its_commit_sha_is_kept(tmp_path):
    run = run_at(1)
    env = {k: v for k, v in run.environment.items() if k != "git"}
    path = write_run(tmp_path / "run.json", dataclasses.replace(run, environment=env))
    (added,) = archive.add([path], tmp_path / "h")
    assert added.entry.commit == Commit(sha(1)) and added.entry.branch is None


def test_reading_a_history_names_what_is_not_an_entry_and_ignores_hidden_files(tmp_path):
    paths = [write_run(tmp_path / f"r{i}.json", run_at(i)) for i in range(3)]
    history = tmp_path / "h"
    archive.add(paths, history)
    (history / "README.md").write_text("our benchmark history\n")
    (history / ".0123.json.abc.tmp").write_text("{")  # an interrupted write
    (history / "broken.json").write_text('{"history_version": 1, "run_id": "x"}')
    (history / "results.json").write_text(json.dumps({"schema_version": 1}))
    (history / "bad-field.json").write_text(
        json.dumps(
            {
                **json.loads(next(history.glob("????????????-*.json")).read_text()),
                "cells": [{"scenario": 1}],
            }
        )
    )
    loaded = archive.load(history)
    assert len(loaded.entries) == 3
    reasons = {os.path.basename(path): reason for path, reason in loaded.skipped}
    assert set(reasons) == {"README.md", "broken.json", "results.json", "bad-field.json"}
    assert reasons["README.md"] == "not a history entry (not a .json file)"
    assert reasons["results.json"].startswith("a results file")
    assert "malformed entry" in reasons["broken.json"]
    assert reasons["bad-field.json"] == "field 'cells[0].scenario' must be str, got 1"


def test_the_report_names_skipped_files_and_a_missing_history_is_one_line(tmp_path, capsys):
    history = tmp_path / "h"
    archive.add([write_run(tmp_path / "r.json", run_at(0))], history)
    (history / "notes.txt").write_text("x")
    html = tmp_path / "d.html"
    assert main(["history", "report", "--history", str(history), "--html", str(html)]) == 0
    err = capsys.readouterr().err
    assert f"skipped {history / 'notes.txt'}: not a history entry" in err
    assert "notes.txt" in html.read_text()
    code = main(["history", "report", "--history", str(tmp_path / "none"), "--html", str(html)])
    assert code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("scanbench: error: --history") and "scanbench history add" in line


def test_a_history_path_that_is_a_file_is_one_line(tmp_path, capsys):
    path = write_run(tmp_path / "run.json", run_at(1))
    (tmp_path / "file").write_text("")
    assert main(["history", "add", str(path), "--history", str(tmp_path / "file")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--history" in line and "file" in line


def test_credentials_never_reach_the_store():
    def remote(url):
        return archive.commit_of({"git": {"commit": "a" * 40, "remote": url}})[0].remote

    assert remote("https://user:t0ken@github.com/o/r.git") == "https://github.com/o/r.git"
    assert remote("git@github.com:o/r.git") == "git@github.com:o/r.git"


@pytest.mark.parametrize(
    ("remote", "url"),
    [
        ("https://github.com/o/r.git", "https://github.com/o/r/commit/abc"),
        ("https://github.com/o/r", "https://github.com/o/r/commit/abc"),
        ("git@github.com:o/r.git", "https://github.com/o/r/commit/abc"),
        ("ssh://git@github.com/o/r.git", "https://github.com/o/r/commit/abc"),
        ("https://gitlab.com/g/sub/r.git", "https://gitlab.com/g/sub/r/-/commit/abc"),
        ("https://bitbucket.org/t/r.git", "https://bitbucket.org/t/r/commits/abc"),
        ("https://codeberg.org/o/r.git", "https://codeberg.org/o/r/commit/abc"),
        ("https://GitHub.com/o/r", "https://github.com/o/r/commit/abc"),
        ("/srv/git/r.git", None),
        ("https://example.org/r.git", None),
        # recognised hosts by exact name, never by a substring
        ("https://github.com.evil.example/o/r.git", None),
        ("https://evilgithub.com/o/r.git", None),
        ("git@gitlab.attacker.example:o/r.git", None),
        ("https://github.enterprise.example/o/r.git", None),
        (None, None),
    ],
)
def test_commit_links_for_github_and_gitlab_remotes(remote, url):
    assert series.commit_url(remote, "abc") == url


def test_commits_are_ordered_parents_first_then_by_date():
    """A rebased branch keeps its author dates: the parent links decide."""
    entries = []
    for index, date in enumerate(["2026-01-05T00:00:00+00:00", "2026-01-01T00:00:00+00:00",
                                  "2026-01-03T00:00:00+00:00"]):  # fmt: skip
        run = run_at(index, date=date)
        entries.append(archive.entry_of(run, "x"))
    ordered = [commit.sha for commit in series.order_commits(entries)]
    assert ordered == [sha(0), sha(1), sha(2)]
    unrelated = [archive.entry_of(run_at(i, parents=[], date=d), "x") for i, d in
                 ((0, "2026-01-05T00:00:00Z"), (1, "2026-01-01T00:00:00Z"))]  # fmt: skip
    assert [c.sha for c in series.order_commits(unrelated)] == [sha(1), sha(0)]


def test_one_commit_measured_twice_shows_the_later_run_and_machines_never_mix():
    first = run_at(1)
    again = dataclasses.replace(
        run_at(1), environment={**first.environment, "timestamp": "2026-12-01T00:00:00+00:00"}
    )
    other = run_at(1, machine="workstation")
    entries = [archive.entry_of(r, "x") for r in (first, again, other)]
    timeline = series.timeline(archive.History(tuple(entries), ()))
    cell = timeline.cells["mppi/vmapped/smoke/float32"]
    assert [s.line.machine.name for s in cell] == ["ci-box", "workstation"]
    (point,) = cell[0].points
    assert point.runs == 2
    later = next(c for c in entries[1].cells if c.label == "mppi/vmapped/smoke/float32")
    assert point.cell == later


def test_malformed_entries_raise_a_store_error_naming_the_field():
    with pytest.raises(StoreError, match="history_version 2"):
        Entry.from_json({"history_version": 2})
    with pytest.raises(StoreError, match="not a JSON object"):
        Entry.from_json([])


def test_history_add_is_quick_to_start():
    """``scanbench history add`` imports neither matplotlib nor ruptures."""
    code = (
        "import sys; from scanbench.cli import history, main; "
        "print(sorted({'matplotlib', 'ruptures', 'jax'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@contextlib.contextmanager
def never_opened(fifo):
    """Yields an event set if anything opened ``fifo`` for reading meanwhile: a writer is
    tried every 20 ms and closed at once, which also releases a reader blocked in open()
    (it then reads an empty file) instead of hanging the test."""
    opened, done = threading.Event(), threading.Event()

    def watch():
        while not done.is_set():
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: no reader
                done.wait(0.02)
                continue
            os.close(fd)
            opened.set()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield opened
    finally:
        done.set()
        thread.join()


def _other_entry(tmp_path, target):
    other = archive.entry_of(run_at(2), "other.json")
    target.write_text(json.dumps(other.to_json()))


def _truncate(tmp_path, target):
    target.write_bytes(target.read_bytes()[:40])


def _fifo(tmp_path, target):
    target.unlink()
    os.mkfifo(target)


def _link(destination):
    def take(tmp_path, target):
        copy = tmp_path / "copy-of-entry.json"
        copy.write_bytes(target.read_bytes())
        target.unlink()
        target.symlink_to(copy if destination == "copy" else destination)

    return take


@pytest.mark.parametrize(
    ("take", "why"),
    [
        (_truncate, "not valid JSON"),
        (_other_entry, "(it holds run "),
        (_fifo, "not a regular file (a FIFO)"),
        (_link("/dev/zero"), "not a regular file (a symbolic link)"),
        (_link("copy"), "not a regular file (a symbolic link)"),
    ],
    ids=["truncated", "another run", "fifo", "link to /dev/zero", "link to a copy"],
)
def test_a_name_taken_by_anything_but_this_run_s_entry_fails_the_add_and_is_kept(
    tmp_path, capsys, take, why
):
    """Adding a run again finds its name taken by something else: named, exit 1, left as
    it is (never replaced); the report names it too unless it is an entry, and neither
    opens a FIFO."""
    path = write_run(tmp_path / "run.json", run_at(1))
    history = tmp_path / "h"
    (added,) = archive.add([path], history)
    target = history / added.entry.filename
    take(tmp_path, target)
    before = os.lstat(target)
    content = target.read_bytes() if target.is_file() and not target.is_symlink() else None
    with never_opened(target) if target.is_fifo() else contextlib.nullcontext() as opened:
        assert main(["history", "add", str(path), "--history", str(history)]) == 1
        out, err = capsys.readouterr()
        html = tmp_path / "d.html"
        assert main(["history", "report", "--history", str(history), "--html", str(html)]) == 0
        report = capsys.readouterr().err
    assert opened is None or not opened.is_set()
    assert out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith(f"skipped {path}: {target} exists and is not this run's entry (")
    assert why in line and line.endswith("; left as it is")
    after = os.lstat(target)
    assert (after.st_mode, after.st_ino, after.st_size) == (
        before.st_mode,
        before.st_ino,
        before.st_size,
    )
    if content is not None:
        assert target.read_bytes() == content
    assert [p.name for p in history.iterdir() if p.name.startswith(".")] == []
    if take is not _other_entry:  # another run's entry is still an entry: read
        assert f"skipped {target}: " in report


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_history_add_refuses_what_is_not_a_regular_file_without_opening_it(tmp_path, capsys, kind):
    path = tmp_path / "results.json"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    good = write_run(tmp_path / "run.json", run_at(1))
    with never_opened(path) if kind == "fifo" else contextlib.nullcontext() as opened:
        code = main(["history", "add", str(path), str(good), "--history", str(tmp_path / "h")])
    assert opened is None or not opened.is_set()
    assert code == 1
    out, err = capsys.readouterr()
    (line,) = err.strip().splitlines()
    what = "a FIFO" if kind == "fifo" else "a directory"
    assert line == f"skipped {path}: not a regular file ({what})"
    assert out.startswith(f"added: {good}")


def test_adding_an_added_run_again_under_another_name_keeps_the_stored_one(tmp_path, capsys):
    path = write_run(tmp_path / "run.json", run_at(1))
    history = str(tmp_path / "h")
    assert main(["history", "add", str(path), "--history", history]) == 0
    capsys.readouterr()
    code = main(["history", "add", str(path), "--history", history, "--machine", "renamed"])
    assert code == 0
    (line,) = capsys.readouterr().out.strip().splitlines()
    assert line.startswith(f"already in the history: {path} -> ")
    assert line.endswith(
        "(commit " + sha(1)[:7] + ", main, ci-box, 4 cells; added before: --machine and "
        "--branch do not rename it)"
    )
    (entry,) = archive.load(history).entries
    assert entry.machine.name == "ci-box"


def test_a_report_of_a_history_path_that_is_a_file_says_so(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    html = str(tmp_path / "d.html")
    assert main(["history", "report", "--history", str(tmp_path / "file"), "--html", html]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    where = tmp_path / "file"
    assert (
        line == f"scanbench: error: --history {where}: not a directory; give the history directory"
    )


def _one_cell(entry: Entry) -> Entry:
    (cell,) = [c for c in entry.cells if c.label == "mppi/vmapped/smoke/float32"]
    return dataclasses.replace(entry, cells=(cell,))


FUZZED = _one_cell(archive.entry_of(run_at(1), "r1.json"))
NEIGHBOUR = _one_cell(archive.entry_of(run_at(2), "r2.json"))  # its parent is FUZZED's commit
DELETE = object()


def _paths(value, prefix=()):
    """Every place in a JSON value: the value itself, and (recursively) what it holds."""
    yield prefix
    if isinstance(value, dict | list):
        for key, inner in value.items() if isinstance(value, dict) else enumerate(value):
            yield from _paths(inner, (*prefix, key))


STORED = json.loads(json.dumps(FUZZED.to_json()))
PLACES = sorted(_paths(STORED), key=repr)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=6)
    | st.sampled_from([sha(1), sha(2), "2026-10-01T01:00:00+00:00", "ok"]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


def _mutated(place, value) -> str:
    """The stored text of `FUZZED` with ``value`` at ``place`` (`DELETE`: removed; the
    whole entry removed is an empty file)."""
    if not place:
        return "" if value is DELETE else json.dumps(value)
    data = json.loads(json.dumps(STORED))
    *parents, last = place
    holder = data
    for key in parents:
        holder = holder[key]
    if value is DELETE:
        del holder[last]
    else:
        holder[last] = value
    return json.dumps(data)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(place=st.sampled_from(PLACES), value=JSON | st.just(DELETE))
@example(place=("commit", "date"), value=5)
@example(place=("commit", "subject"), value=5)
@example(place=("commit", "remote"), value=7)
@example(place=("machine", "name"), value=["x"])
@example(place=("setup", "jax"), value=["x"])
@example(place=("commit", "parents"), value=[sha(1)])  # its own parent
@example(place=("commit", "parents"), value=[sha(2)])  # a cycle with NEIGHBOUR
@example(place=("cells", 0, "median"), value=float("inf"))
@example(place=("cells", 0, "confidence"), value=True)
@example(place=("cells", 0, "samples"), value="30")
@example(place=("cells", 0, "disturbed"), value=1)
@example(place=("cells", 0, "params"), value={"block": [1]})
def test_a_mutated_entry_is_read_or_named_and_the_report_never_fails(place, value):
    """Any field of a valid entry replaced by any JSON value (or removed): the report
    (markdown and page) is written all the same, and the file is either read as an entry
    or named among the skipped files."""
    with tempfile.TemporaryDirectory() as folder:
        history = Path(folder)
        fuzzed = history / FUZZED.filename
        fuzzed.write_text(_mutated(place, value))
        (history / NEIGHBOUR.filename).write_text(json.dumps(NEIGHBOUR.to_json()))
        loaded = archive.load(history)
        timeline = series.timeline(loaded)
        detected = changes.detect(timeline)
        summary.markdown(timeline, detected, history)
        dashboard.page(timeline, detected, "fuzz", history)
        try:
            read = archive.read_entry(fuzzed).run_id
        except StoreError:
            read = None
    named = [reason for path, reason in loaded.skipped if path == str(fuzzed)]
    if read is None:
        (reason,) = named
        assert reason
    else:
        assert named == [] and read in {entry.run_id for entry in loaded.entries}

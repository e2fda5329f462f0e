"""Safe writes: atomic for regular files, symlinks followed, special files never replaced;
the journal survives a kill mid-write."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from scanbench.api import Record, StoreError
from scanbench.execution.journal import Journal, journal_path, read_journal
from scanbench.safe_files import write_text_atomic


def test_a_new_file_gets_the_users_umask(tmp_path):
    old = os.umask(0o027)
    try:
        path = write_text_atomic(tmp_path / "sub" / "new.md", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640 and path.read_text() == "x"


def test_a_replaced_file_keeps_its_mode_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "r.md"
    path.write_text("old")
    path.chmod(0o604)
    write_text_atomic(path, "new")
    assert path.read_text() == "new" and stat.S_IMODE(path.stat().st_mode) == 0o604
    assert [p.name for p in tmp_path.iterdir()] == ["r.md"]


def test_a_symlink_is_followed_and_kept(tmp_path):
    target = tmp_path / "target.md"
    target.write_text("old")
    link = tmp_path / "link.md"
    link.symlink_to(target)
    write_text_atomic(link, "new")
    assert link.is_symlink() and target.read_text() == "new"


def test_dev_null_is_written_in_place_not_replaced():
    before = os.stat("/dev/null")
    write_text_atomic("/dev/null", "discarded")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


def test_a_fifo_is_written_in_place(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    write_text_atomic(fifo, "through the pipe")
    reader.join(timeout=10)
    assert received == ["through the pipe"] and stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_directory_or_socket_is_refused(tmp_path):
    with pytest.raises(StoreError, match="it is a directory"):
        write_text_atomic(tmp_path, "x")
    import socket

    path = tmp_path / "s"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    try:
        with pytest.raises(StoreError, match="it is a socket"):
            write_text_atomic(path, "x")
    finally:
        server.close()


def test_an_unwritable_folder_is_one_line(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    if os.access(folder, os.W_OK):  # root ignores permissions
        pytest.skip("running as root: permissions are not enforced")
    with pytest.raises(StoreError, match="cannot write"):
        write_text_atomic(folder / "x.json", "x")


def record(backend: str) -> Record:
    return Record("toy", backend, "sequential", "numpy", "smoke", "float64", 0, "ok")


def test_the_journal_keeps_every_finished_cell_and_drops_a_torn_line(tmp_path):
    path = journal_path(tmp_path / "run.json")
    assert path.name == "run.json.journal"
    with Journal.create(path, {"hostname": "h"}, {"argv": []}) as journal:
        journal.append(record("a"))
        journal.append(record("b"))
    with path.open("a") as handle:
        handle.write('{"record": {"scenario": "to')  # killed mid-write
    environment, invocation, records = read_journal(path)
    assert environment == {"hostname": "h"} and invocation == {"argv": []}
    assert [r.backend for r in records] == ["a", "b"]
    with Journal.reopen(path) as journal:  # a resumed run: the torn line is cut off
        journal.append(record("c"))
    assert [r.backend for r in read_journal(path)[2]] == ["a", "b", "c"]
    path.write_text(path.read_text().replace('"journal": 1', '"journal": 9'))
    with pytest.raises(StoreError, match="not a scanbench journal"):
        read_journal(path)

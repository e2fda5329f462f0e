"""Safe writes: atomic for regular files, symlinks followed only where no one else could
have planted them, special files never replaced or waited on; outputs apart from inputs;
the journal survives a kill mid-write."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from scanbench.api import InputError, Record, StoreError
from scanbench.execution.journal import Journal, journal_path, read_journal
from scanbench.safe_files import _planted, output_path, outputs_apart, write_text_atomic


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


def test_a_fifo_or_another_device_is_refused_at_once_not_waited_on(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # no reader: writing into it would wait forever
    with pytest.raises(StoreError, match=r"pipe: it is a FIFO, not a regular file"):
        write_text_atomic(fifo, "x")
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    with pytest.raises(StoreError, match="it is a character device"):
        write_text_atomic("/dev/zero", "x")


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


ME, OTHER = os.geteuid(), os.geteuid() + 4242


def _stat(uid: int, mode: int = 0) -> os.stat_result:
    return os.stat_result((mode, 0, 0, 1, uid, 0, 0, 0, 0, 0))


@pytest.mark.parametrize(
    ("link_uid", "folder_uid", "folder_mode", "planted"),
    [
        (OTHER, ME, 0o1777, True),  # /tmp: another user's link
        (OTHER, ME, 0o775, True),  # a group-writable folder, not sticky
        (OTHER, ME, 0o757, True),  # world-writable
        (ME, OTHER, 0o1777, False),  # the link is mine
        (OTHER, OTHER, 0o1777, False),  # the folder owner's link (the kernel's rule)
        (OTHER, ME, 0o755, False),  # no one else can write the folder: it is as I left it
    ],
)
def test_a_link_is_planted_when_others_can_write_its_folder_and_it_is_theirs(
    link_uid, folder_uid, folder_mode, planted
):
    assert _planted(_stat(link_uid), _stat(folder_uid, stat.S_IFDIR | folder_mode)) is planted


@pytest.fixture
def shared(tmp_path):
    """A folder as /tmp is: sticky, world-writable."""
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o1777)
    return folder


def _as_another_user(link):
    if os.geteuid() != 0:
        pytest.skip("only root can give a link to another user")
    os.lchown(link, OTHER, OTHER)


@pytest.mark.parametrize("where", ["the file", "a folder of the path"])
def test_a_link_planted_in_a_shared_folder_is_refused_and_its_target_kept(tmp_path, shared, where):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "report.md").write_text("precious")
    if where == "the file":
        link, path = shared / "report.md", shared / "report.md"
        link.symlink_to(victim / "report.md")
    else:
        link, path = shared / "out", shared / "out" / "report.md"
        link.symlink_to(victim)
    _as_another_user(link)
    with pytest.raises(StoreError, match=rf"{link} is a symbolic link of user {OTHER} in"):
        write_text_atomic(path, "overwritten")
    assert (victim / "report.md").read_text() == "precious"


def test_my_own_link_in_a_shared_folder_is_followed(tmp_path, shared):
    target = tmp_path / "mine.md"
    (shared / "report.md").symlink_to(target)
    write_text_atomic(shared / "report.md", "x")
    assert target.read_text() == "x" and (shared / "report.md").is_symlink()


def test_output_path_resolves_as_realpath_does(tmp_path, monkeypatch):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "up").symlink_to("a/b/..")
    (tmp_path / "abs").symlink_to(tmp_path / "a" / "b")
    (tmp_path / "loop").symlink_to("loop")
    monkeypatch.chdir(tmp_path)
    for path in ["up/x.md", "abs/../b/new/x.md", "./a//b/x.md", str(tmp_path / "up")]:
        assert output_path(path) == Path(os.path.realpath(path))
    with pytest.raises(StoreError, match="too many symbolic links"):
        output_path("loop")


def test_an_output_that_is_an_input_or_another_output_is_refused(tmp_path):
    results = tmp_path / "run.json"
    results.write_text("{}")
    (tmp_path / "hard.json").hardlink_to(results)
    (tmp_path / "soft.json").symlink_to(results)
    for same in ["run.json", "hard.json", "soft.json", "./x/../run.json"]:
        with pytest.raises(InputError, match=r"^--md .* is one of the input files"):
            outputs_apart(
                {"--out": str(tmp_path / "o.json"), "--md": str(tmp_path / same)}, [results]
            )
    with pytest.raises(InputError, match=r"^--md and --html name the same file"):
        outputs_apart({"--md": str(tmp_path / "r.md"), "--html": str(tmp_path / "r.md")}, [])
    outputs_apart({"--out": str(tmp_path / "o.json"), "--md": None, "--html": "r.html"}, [results])


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

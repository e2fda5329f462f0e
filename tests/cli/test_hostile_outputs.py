"""Outputs that cannot be turned: a report is never written over its inputs, through a
link someone else planted, or into a FIFO it would wait on; each refusal is one line,
exit 2, with nothing written."""

from __future__ import annotations

import os
import shutil

import pytest

from scanbench.cli.main import main
from tests.execution.test_shards import write_shards
from tests.support.paths import DATA

TOY_RUN = DATA / "toy-failed.json"


def refused(capsys, argv: list[str], message: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err, err


def test_gather_writes_no_report_over_a_shard_or_the_merged_run(tmp_path, capsys):
    paths = write_shards(tmp_path / "shards", 2)
    before = paths[0].read_bytes()
    out = str(tmp_path / "m.json")
    shards = [str(p) for p in paths]
    refused(capsys, ["gather", *shards, "--out", out, "--md", shards[0]], "is one of the input")
    refused(
        capsys, ["gather", str(tmp_path / "shards"), "--out", out, "--html", shards[1]], "shard-2"
    )
    refused(capsys, ["gather", *shards, "--out", out, "--md", out], "--out and --md name the")
    assert paths[0].read_bytes() == before and not os.path.exists(out)


def test_history_report_writes_nothing_into_the_history_or_twice(tmp_path, capsys):
    from scanbench.history import archive
    from scanbench.results import write_run
    from tests.history.test_history_store import run_at

    history = tmp_path / "h"
    archive.add([write_run(tmp_path / "r.json", run_at(0))], history)
    (entry,) = history.iterdir()
    before = entry.read_bytes()
    base = ["history", "report", "--history", str(history)]
    refused(capsys, [*base, "--html", str(entry)], "is in the history directory")
    refused(capsys, [*base, "--html", str(history / "d.html")], "is in the history directory")
    html = str(tmp_path / "d.html")
    refused(capsys, [*base, "--html", html, "--md", html], "--html and --md name the same file")
    assert entry.read_bytes() == before and list(history.iterdir()) == [entry]


def test_a_fifo_as_output_is_refused_at_once(tmp_path, capsys):
    fifo = tmp_path / "report.md"
    os.mkfifo(fifo)  # no reader: a write would wait for ever
    refused(capsys, ["report", str(TOY_RUN), "--md", str(fifo)], "it is a FIFO")


def test_a_link_planted_in_a_shared_folder_is_not_followed(tmp_path, capsys):
    if os.geteuid() != 0:
        pytest.skip("only root can give a link to another user")
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    victim = tmp_path / "victim.json"
    shutil.copy(TOY_RUN, victim)
    link = shared / "report.md"
    link.symlink_to(victim)
    os.lchown(link, 4242, 4242)
    refused(capsys, ["report", str(TOY_RUN), "--md", str(link)], "may have been planted")
    assert victim.read_bytes() == TOY_RUN.read_bytes() and link.is_symlink()

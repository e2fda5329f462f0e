"""The journal of a run: each finished cell appended durably the moment it finishes.

A JSON-lines file beside the results file (``<results>.journal``): the first line holds
the run's environment and invocation, every further line one record. Each line is
flushed and fsynced before the next cell starts, so a Ctrl-C, a SIGKILL or a power cut
loses at most the cell that was running. A last line cut short by a kill mid-write is
ignored on reading. The results file is written from the journal (atomically) after
every cell; `scanbench run --resume RESULTS` reads the journal (or, when the run had
finished and the journal is gone, the results file) and runs only the missing cells.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..api import Record, StoreError
from ..credentials import redact

JOURNAL_VERSION = 1


def journal_path(results: str | os.PathLike[str]) -> Path:
    path = Path(results)
    return path.with_name(path.name + ".journal")


def _append_line(handle, data: Any) -> None:
    handle.write(redact(json.dumps(data)) + "\n")
    handle.flush()
    os.fsync(handle.fileno())


class Journal:
    """An open journal (a context manager); `append` one record per finished cell."""

    def __init__(self, path: Path, handle) -> None:
        self.path, self._handle = path, handle

    @classmethod
    def create(
        cls, path: Path, environment: Mapping[str, Any], invocation: Mapping[str, Any]
    ) -> Journal:
        """A new journal (replacing none: the caller checked the path is free)."""
        handle = open(path, "w", encoding="utf-8")  # noqa: SIM115 (closed in close())
        header = {
            "journal": JOURNAL_VERSION,
            "environment": dict(environment),
            "invocation": dict(invocation),
        }
        _append_line(handle, header)
        return cls(path, handle)

    @classmethod
    def reopen(cls, path: Path) -> Journal:
        """Append to an existing journal (a resumed run), first cutting off a last line
        torn by a kill mid-write."""
        data = path.read_bytes()
        complete = data.rfind(b"\n") + 1
        if complete < len(data):
            with open(path, "r+b") as handle:
                handle.truncate(complete)
        return cls(path, open(path, "a", encoding="utf-8"))

    def append(self, record: Record) -> None:
        _append_line(self._handle, {"record": record.to_json()})

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_journal(path: Path) -> tuple[dict[str, Any], dict[str, Any], list[Record]]:
    """(environment, invocation, records) of a journal; a torn last line is dropped.

    Raises:
        StoreError: the file is not a scanbench journal, or a line other than the last
            is malformed.
    """
    try:
        lines = redact(path.read_text(encoding="utf-8")).splitlines()
    except OSError as error:
        raise StoreError(f"{path}: cannot read journal ({error.strerror})") from None
    parsed = []
    for number, line in enumerate(lines, 1):
        try:
            parsed.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines):  # cut short by a kill while writing: that cell is lost
                break
            raise StoreError(f"{path}:{number}: malformed journal line") from None
    if not parsed or not isinstance(parsed[0], dict) or parsed[0].get("journal") != 1:
        raise StoreError(f"{path}: not a scanbench journal")
    header = parsed[0]
    records = []
    for number, entry in enumerate(parsed[1:], 2):
        try:
            records.append(Record.from_json(entry["record"]))
        except (KeyError, TypeError, ValueError, StoreError) as error:
            raise StoreError(f"{path}:{number}: malformed record ({error})") from None
    return header["environment"], header["invocation"], records

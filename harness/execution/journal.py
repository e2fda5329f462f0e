"""The journal of a run: each finished cell appended durably the moment it finishes.

A JSON-lines file beside the results file (``<results>.journal``): the first line holds
the run's environment and invocation, every further line one record. Each line is
flushed and fsynced before the next cell starts, so a Ctrl-C, a SIGKILL or a power cut
loses at most the cell that was running. A last line cut short by a kill mid-write is
ignored on reading. The results file is written from the journal (atomically) after
every cell; `scanbench run --resume RESULTS` reads the journal (or, when the run had
finished and the journal is gone, the results file) and runs only the missing cells.

One journal per output, claimed exclusively: a run holds an exclusive lock on its
journal (``flock``) for as long as it writes it, a new journal is written beside its name
and linked into place (``link(2)`` fails when the name exists), and a journal is reopened
only once locked and checked to be still the file its name points to. A second run with
the same ``--out`` (or a second ``--resume``) is refused in one line, exit 2, before it
writes anything; it never appends to, truncates or replaces the first one's journal.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from ..api import InputError, Record, StoreError
from ..credentials import redact
from ..stored_json import decoded, parse_json

JOURNAL_VERSION = 1


def journal_path(results: str | os.PathLike[str]) -> Path:
    path = Path(results)
    return path.with_name(path.name + ".journal")


def _append_line(handle, data: Any) -> None:
    handle.write(redact(json.dumps(data)) + "\n")
    handle.flush()
    os.fsync(handle.fileno())


def _in_use(path: Path) -> InputError:
    results = path.with_name(path.name.removesuffix(".journal"))
    return InputError(
        f"--out {str(results)!r}: another scanbench run is writing to it now (its journal "
        f"{path.name} is locked); wait for that run to finish, or give another --out"
    )


def _lock(handle: IO[str], path: Path) -> None:
    """An exclusive lock on the open journal, or `InputError` when another run holds it."""
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise _in_use(path) from None


def in_use(path: Path) -> bool:
    """Whether a run holds the journal at ``path`` now (False when there is none)."""
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115 (closed below)
    except FileNotFoundError:
        return False
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
    return False


def refuse_if_in_use(path: Path) -> None:
    """Raise `InputError` (one line, exit 2) when a run holds the journal at ``path`` now:
    checked before anything else is done for a second run of the same output."""
    if in_use(path):
        raise _in_use(path)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class Journal:
    """An open, locked journal (a context manager); `append` one record per finished cell."""

    def __init__(self, path: Path, handle) -> None:
        self.path, self._handle = path, handle

    @classmethod
    def create(
        cls, path: Path, environment: Mapping[str, Any], invocation: Mapping[str, Any]
    ) -> Journal:
        """A new journal, claimed exclusively: its header written and locked beside its
        name, then linked to the name.

        Raises:
            InputError: the name is taken (another run's journal, or one an interrupted
                run left): nothing of it is touched.
        """
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        handle = os.fdopen(fd, "w", encoding="utf-8")
        try:
            os.fchmod(fd, 0o666 & ~_umask())
            _lock(handle, path)  # a new file: nobody else holds it
            header = {
                "journal": JOURNAL_VERSION,
                "environment": dict(environment),
                "invocation": dict(invocation),
            }
            _append_line(handle, header)
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise _in_use(path) if in_use(path) else _taken(path) from None
            except OSError:  # a file system without hard links: check, then rename
                if os.path.lexists(path):
                    raise _taken(path) from None
                os.rename(tmp, path)
        except BaseException:
            handle.close()
            raise
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        return cls(path, handle)

    @classmethod
    def reopen(cls, path: Path) -> Journal:
        """Append to an existing journal (a resumed run) once it is locked and still the
        file its name points to, first cutting off a last line torn by a kill mid-write.

        Raises:
            InputError: another run holds it, or it was replaced or removed meanwhile.
        """
        handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())
        _lock(handle, path)
        opened = os.fstat(handle.fileno())
        try:
            named = os.stat(path)
        except FileNotFoundError:
            named = None
        if named is None or (named.st_dev, named.st_ino) != (opened.st_dev, opened.st_ino):
            handle.close()
            raise _in_use(path)  # the run we waited behind finished or replaced it
        data = path.read_bytes()
        complete = data.rfind(b"\n") + 1
        if complete < len(data):
            os.ftruncate(handle.fileno(), complete)
        return cls(path, handle)

    def remove(self) -> None:
        """Remove the journal while still holding it (a complete run: the results file
        holds everything), so that no other run can claim it between."""
        self.path.unlink(missing_ok=True)

    def append(self, record: Record) -> None:
        _append_line(self._handle, {"record": record.to_json()})

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _taken(path: Path) -> InputError:
    results = path.with_name(path.name.removesuffix(".journal"))
    return InputError(
        f"--out {str(results)!r}: {path.name} exists (a run interrupted before it saved a "
        f"cell, or one that started beside this one): `scanbench run --resume {results}` "
        "continues it; --force starts over"
    )


def read_journal(path: Path) -> tuple[dict[str, Any], dict[str, Any], list[Record]]:
    """(environment, invocation, records) of a journal; a torn last line is dropped.

    Raises:
        StoreError: the file is not a scanbench journal, or a line other than the last
            is malformed.
    """
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise StoreError(f"{path}: cannot read journal ({error.strerror})") from None
    lines = raw.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    parsed = []
    for number, line in enumerate(lines, 1):
        try:
            parsed.append(parse_json(redact(decoded(line, "")), ""))
        except StoreError as error:
            if number == len(lines):  # cut short by a kill while writing: that cell is lost
                break
            raise StoreError(f"{path}:{number}: malformed journal line ({error})") from None
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

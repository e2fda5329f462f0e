"""Versioned results files: one JSON file per run, written atomically.

Layout::

    {"schema_version": 1, "environment": {...}, "invocation": {...},
     "records": [Record.to_json(), ...]}
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.api import Record, StoreError

SCHEMA_VERSION = 1


class SchemaVersionError(StoreError):
    """A scanbench results file of another schema version (reports show it apart)."""


@dataclasses.dataclass(frozen=True)
class Run:
    """One stored run: environment metadata, how it was invoked, one record per cell."""

    environment: Mapping[str, Any]
    invocation: Mapping[str, Any]
    records: tuple[Record, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "environment": dict(self.environment),
            "invocation": dict(self.invocation),
            "records": [record.to_json() for record in self.records],
        }


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> Path:
    """Write ``data`` as JSON to a temp file beside ``path``, then rename it into place.

    A crash mid-write leaves any previous file at ``path`` untouched.
    """
    return write_text_atomic(path, json.dumps(data, indent=1) + "\n")


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write text to a temp file beside ``path``, then rename it into place."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def write_run(path: str | os.PathLike[str], run: Run) -> Path:
    return write_json_atomic(path, run.to_json())


def load_run(path: str | os.PathLike[str]) -> Run:
    """Read a results file, refusing anything that is not a run of this schema version.

    Raises:
        StoreError: naming the file and what is wrong with it.
    """
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as error:
        raise StoreError(f"{source}: cannot read results file ({error.strerror})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise StoreError(
            f"{source}: not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})"
        ) from None
    if not isinstance(data, dict) or "schema_version" not in data:
        raise StoreError(f"{source}: not a scanbench results file (no schema_version)")
    version = data["schema_version"]
    if version != SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{source}: schema version {version!r}, this scanbench reads version "
            f"{SCHEMA_VERSION}; re-run the benchmark with this version"
        )
    for key, kind in (("environment", dict), ("invocation", dict), ("records", list)):
        if not isinstance(data.get(key), kind):
            raise StoreError(f"{source}: field {key!r} missing or not a {kind.__name__}")
    records = []
    for index, raw in enumerate(data["records"]):
        if not isinstance(raw, dict):
            raise StoreError(f"{source}: record {index} is not an object")
        try:
            records.append(Record.from_json(raw))
        except (StoreError, TypeError, ValueError) as error:
            raise StoreError(f"{source}: record {index}: {error}") from None
    return Run(data["environment"], data["invocation"], tuple(records))

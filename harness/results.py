"""Versioned results files: one JSON file per run, written atomically.

Layout::

    {"schema_version": 1, "environment": {...}, "invocation": Invocation.to_json(),
     "records": [Record.to_json(), ...]}

The invocation (how the run was asked for) is read and written by
`scanbench.invocation`, the records by `scanbench.api.Record`.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .api import CHAINS, Record, StoreError
from .credentials import redact
from .errors import SchemaVersionError
from .invocation import Invocation, ScenarioFacts
from .safe_files import write_json_atomic
from .stored_json import decoded, parse_json
from .stored_shapes import check_nested

SCHEMA_VERSION = 1


@dataclasses.dataclass(frozen=True)
class Run:
    """One stored run: environment metadata, how it was invoked, one record per cell."""

    environment: Mapping[str, Any]
    invocation: Invocation
    records: tuple[Record, ...]

    @property
    def scenarios(self) -> Mapping[str, ScenarioFacts]:
        """Per scenario name, its stored facts."""
        return self.invocation.scenarios

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "environment": dict(self.environment),
            "invocation": self.invocation.to_json(),
            "records": [record.to_json() for record in self.records],
        }


def write_run(path: str | os.PathLike[str], run: Run) -> Path:
    return write_json_atomic(path, run.to_json())


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _non_negative(value: Any) -> bool:
    return _is_number(value) and math.isfinite(value) and value >= 0


# field -> (check, what it must be): every field of a stored record a report reads
RECORD_FIELDS: dict[str, tuple[Any, str]] = {
    **{
        key: (lambda v: isinstance(v, str), "a string")
        for key in ("scenario", "backend", "strategy", "engine", "size", "dtype", "status")
    },
    "seed": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "an int >= 0"),
    "error": (lambda v: v is None or isinstance(v, str), "a string or null"),
    **{
        key: (lambda v: isinstance(v, dict), "an object")
        for key in (
            "device",
            "size_params",
            "work",
            "stats",
            "counts",
            "decomposition",
            "extra",
            "interference",
            "sampling",
            "params",
        )
    },
    **{
        key: (lambda v: v is None or _non_negative(v), "a finite number >= 0 or null")
        for key in ("prepare_s", "first_call_s", "max_error", "wall_s")
    },
    "samples_s": (
        lambda v: isinstance(v, list) and all(_non_negative(x) for x in v),
        "a list of finite numbers >= 0",
    ),
    "x64": (lambda v: v is None or isinstance(v, bool), "true, false or null"),
    "xla_flags": (
        lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
        "a list of strings",
    ),
    "xla_flags_applied": (lambda v: isinstance(v, bool), "true or false"),
    "chains": (lambda v: v is None or v in CHAINS, f"one of {', '.join(CHAINS)} or null"),
    "devices": (
        lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1),
        "an int >= 1 or null",
    ),
}
STATS_FIELDS = ("median", "q25", "q75", "iqr", "min", "max", "mean", "stddev", "total")


def validate_record(raw: Mapping[str, Any]) -> None:
    """Raise StoreError naming the first field of a stored record with a wrong type or
    range (so a report never renders a string, NaN or negative time)."""
    for key, value in raw.items():
        check = RECORD_FIELDS.get(key)
        if check is not None and not check[0](value):
            raise StoreError(f"field {key!r} must be {check[1]}, got {value!r:.80}")
    stats = raw.get("stats") or {}
    for key in STATS_FIELDS:
        if key in stats and not (stats[key] is None or _non_negative(stats[key])):
            raise StoreError(
                f"field 'stats.{key}' must be a finite number >= 0, got {stats[key]!r:.80}"
            )
    work = raw.get("work") or {}
    for key, value in work.items():
        if not _non_negative(value):
            raise StoreError(f"field 'work.{key}' must be a finite number >= 0, got {value!r:.80}")


def _string_or_none(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _mapping_of(check) -> Any:
    return lambda value: isinstance(value, dict) and all(check(v) for v in value.values())


def _count_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


# top-level field -> key -> (check, what it must be); keys absent are fine (the invocation
# is checked as it is read: scanbench.invocation)
RUN_FIELDS: dict[str, dict[str, tuple[Any, str]]] = {
    "environment": {
        **{
            key: (_string_or_none, "a string or null")
            for key in (
                "timestamp",
                "hostname",
                "python",
                "platform",
                "device_kind",
                "cpu_model",
                "xla_flags",
                "git_commit",
                "scanbench_commit",
            )
        },
        "git": (
            lambda v: v is None or (isinstance(v, dict) and isinstance(v.get("commit"), str)),
            "an object with the commit's sha, date, subject, parents, branch, remote, or null",
        ),
        "versions": (_mapping_of(_string_or_none), "an object of version strings"),
        "device_count": (_count_or_none, "an int >= 0 or null"),
        "cpu_count": (_count_or_none, "an int >= 0 or null"),
        "memory_bandwidth": (
            lambda v: (
                v is None
                or (
                    isinstance(v, dict)
                    and all(x is None or _non_negative(x) for x in v.values())
                    and (v.get("bytes_per_s") is None or v["bytes_per_s"] > 0)
                )
            ),
            "an object of finite numbers >= 0 (bytes_per_s > 0) or null",
        ),
        "overheads": (
            lambda v: (
                v is None
                or (
                    isinstance(v, dict)
                    and all(
                        _non_negative(x) or (k == "platform" and isinstance(x, str))
                        for k, x in v.items()
                    )
                )
            ),
            "an object of finite numbers >= 0 or null",
        ),
        # a run gathered from shards: each shard's environment (scanbench.gathered)
        "shards": (
            lambda v: (
                isinstance(v, list)
                and all(
                    isinstance(x, dict)
                    and _count_or_none(x.get("index"))
                    and x.get("index") is not None
                    and isinstance(x.get("environment"), dict)
                    for x in v
                )
            ),
            "a list of objects with an index and an environment",
        ),
    },
}


def validate_run_fields(data: Mapping[str, Any]) -> None:
    """Raise StoreError naming the first environment field of a results file with a
    wrong type or range."""
    for section, fields in RUN_FIELDS.items():
        for key, (check, what) in fields.items():
            if key in data[section] and not check(data[section][key]):
                value = data[section][key]
                raise StoreError(f"field '{section}.{key}' must be {what}, got {value!r:.80}")


def load_run(path: str | os.PathLike[str]) -> Run:
    """Read a results file, refusing anything that is not a run of this schema version.

    Raises:
        StoreError: naming the file and what is wrong with it.
    """
    source = Path(path)
    try:
        raw = source.read_bytes()
    except OSError as error:
        raise StoreError(f"{source}: cannot read results file ({error.strerror})") from None
    text = decoded(raw, str(source))
    # redacted: a file written before credentials were stripped shows none either
    data = parse_json(redact(text), str(source))
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
    try:
        validate_run_fields(data)
        invocation = Invocation.from_json(data["invocation"])
    except SchemaVersionError as error:
        raise SchemaVersionError(f"{source}: {error}") from None
    except StoreError as error:
        raise StoreError(f"{source}: {error}") from None
    records = []
    for index, raw in enumerate(data["records"]):
        if not isinstance(raw, dict):
            raise StoreError(f"{source}: record {index} is not an object")
        try:
            validate_record(raw)
            check_nested(raw)
            records.append(Record.from_json(raw))
        except (StoreError, TypeError, ValueError) as error:
            raise StoreError(f"{source}: record {index}: {error}") from None
    return Run(data["environment"], invocation, tuple(records))

"""Results files: round trip, atomic writes, clear errors for bad files."""

from __future__ import annotations

import json

import pytest

from scanbench.api import Record, StoreError
from scanbench.invocation import CommandLine, Invocation
from scanbench.results import SCHEMA_VERSION, Run, load_run, write_run
from scanbench.safe_files import write_json_atomic


def make_run() -> Run:
    record = Record(
        scenario="s",
        backend="b",
        strategy="scanned",
        engine="jax",
        size="smoke",
        dtype="float32",
        seed=0,
        status="ok",
        samples_s=(0.1, 0.2),
        stats={"median": 0.15},
    )
    return Run({"hostname": "h"}, Invocation(origin=CommandLine(())), (record,))


def test_round_trip(tmp_path):
    path = write_run(tmp_path / "sub" / "run.json", make_run())
    loaded = load_run(path)
    assert loaded == make_run()
    assert json.loads(path.read_text())["schema_version"] == SCHEMA_VERSION


def test_failed_write_keeps_the_previous_file(tmp_path):
    path = tmp_path / "run.json"
    write_run(path, make_run())
    before = path.read_text()
    with pytest.raises(TypeError):
        write_json_atomic(path, {"records": [object()]})
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temp file left


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "no schema_version"),
        (json.dumps({"schema_version": 0, "records": []}), "schema version 0"),
        (
            json.dumps({"schema_version": SCHEMA_VERSION, "environment": {}, "invocation": {}}),
            "'records' missing",
        ),
        (
            json.dumps(
                {
                    "schema_version": SCHEMA_VERSION,
                    "environment": {},
                    "invocation": {},
                    "records": [{"scenario": "s"}],
                }
            ),
            "record 0: record lacks fields",
        ),
    ],
)
def test_bad_files_give_clear_errors(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(StoreError, match=message) as info:
        load_run(path)
    assert str(path) in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(StoreError, match="cannot read"):
        load_run(tmp_path / "absent.json")


def test_unknown_record_field(tmp_path):
    data = make_run().to_json()
    data["records"][0]["speed"] = 3
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(data))
    with pytest.raises(StoreError, match="unknown fields: speed"):
        load_run(path)

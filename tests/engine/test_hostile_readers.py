"""Readers refuse a bad file in one line: a results file (``scanbench report``), a shard
(``scanbench gather``) and a history entry (``scanbench history report``) that is not
UTF-8, nests past the recursion limit, holds an integer past Python's digit limit, a
field of the wrong type or is cut short is named with its field, exit 2, never a
traceback (exit 70), and the file is left as it was. Few examples per property: the
whole module runs in seconds."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scanbench.cli.main import main
from tests.support.paths import DATA

RESULTS = (DATA / "tdma.json").read_bytes()
FAST = settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))


def _places(value, prefix=()):
    if prefix:
        yield prefix
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _places(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value[:1]):
            yield from _places(inner, (*prefix, index))


STORED = json.loads(RESULTS)
PLACES = sorted(
    (p for p in _places(STORED) if p[0] in ("records", "environment", "schema_version")),
    key=repr,
)
WRONG = st.sampled_from(["x", -3, [], {}, [1], {"a": 1}, True, 1.5, None])


def _bad_bytes(draw_kind: str, data: st.DataObject) -> bytes:
    """A results file made bad in one of the ways a reader crashed on."""
    if draw_kind == "undecodable":
        cut = data.draw(st.integers(1, len(RESULTS) - 1))
        bad = data.draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x80"]))
        return RESULTS[:cut] + bad + RESULTS[cut:]
    if draw_kind == "deep":
        depth = data.draw(st.integers(65, 200_000))
        return b'{"schema_version": 1, "environment": ' + b"[" * depth + b"]" * depth + b"}"
    if draw_kind == "huge-integer":
        digits = data.draw(st.integers(4301, 20_000))
        return RESULTS.replace(b'"schema_version": 1', b'"schema_version": ' + b"7" * digits, 1)
    if draw_kind == "truncated":
        return RESULTS[: data.draw(st.integers(0, len(RESULTS) - 1))]
    place = data.draw(st.sampled_from(PLACES))
    value = data.draw(WRONG)
    mutated = json.loads(RESULTS)
    holder = mutated
    for key in place[:-1]:
        holder = holder[key]
    holder[place[-1]] = value
    return json.dumps(mutated).encode()


def _one_line_refusal(capsys, argv: list[str], path: Path, text: bytes) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err[-600:]
    assert path.read_bytes() == text  # the input is never changed
    if code != 0:  # a wrong type the reports can show (a string where a name goes) is fine
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert str(path) in err


KINDS = ["undecodable", "deep", "huge-integer", "truncated", "wrong-type"]


@pytest.mark.parametrize("kind", KINDS)
@FAST
@given(data=st.data())
def test_report_refuses_a_bad_results_file_in_one_line(capsys, kind, data):
    text = _bad_bytes(kind, data)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.json"
        path.write_bytes(text)
        _one_line_refusal(capsys, ["report", str(path)], path, text)


@pytest.mark.parametrize("kind", KINDS[:4])
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_gather_refuses_a_bad_shard_in_one_line(capsys, kind, data):
    text = _bad_bytes(kind, data)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "shard-1-of-2.json"
        path.write_bytes(text)
        argv = ["gather", str(path), "--out", str(Path(folder) / "m.json"), "--quiet"]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and str(path) in err, err
        assert path.read_bytes() == text and not (Path(folder) / "m.json").exists()


@pytest.mark.parametrize("kind", KINDS[:4])
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_bad_history_entry_is_named_and_skipped(capsys, kind, data):
    text = _bad_bytes(kind, data)
    with tempfile.TemporaryDirectory() as folder:
        history = Path(folder) / "h"
        history.mkdir()
        entry = history / "0123456789ab-0123456789abcdef.json"
        entry.write_bytes(text)
        argv = ["history", "report", "--history", str(history), "--html", f"{folder}/d.html"]
        assert main(argv) == 0
        err = capsys.readouterr().err
        assert err.startswith(f"skipped {entry}: ") and "Traceback" not in err, err
        assert entry.read_bytes() == text


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (b'[rule]\nx = "\xff"\n', "not UTF-8 (byte 12: invalid start byte)"),
        (b"a = " + b"[" * 5000 + b"]" * 5000 + b"\n", "not valid TOML (nested too deep)"),
    ],
    ids=["undecodable", "deep"],
)
def test_gate_refuses_a_bad_gate_file_in_one_line(tmp_path, capsys, text, reason):
    path = tmp_path / "gates.toml"
    path.write_bytes(text)
    assert main(["gate", "--gates", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"scanbench: error: {path}: {reason}\n"
    assert path.read_bytes() == text


def _without_executable_field(field: str) -> bytes:
    mutated = json.loads(RESULTS)
    for record in mutated["records"]:
        executables = ((record.get("counts") or {}).get("static") or {}).get("executables")
        for info in (executables or {}).values():
            info.pop(field, None)
    return json.dumps(mutated).encode()


@pytest.mark.parametrize("field", ["launch_equivalent", "calls_per_run", "kernels", "loops"])
def test_an_executable_without_one_of_its_figures_is_reported_without_it(tmp_path, capsys, field):
    """An older or hand-made file whose compiled programs lack a figure: the report is
    written (that figure left out), never a KeyError (exit 70)."""
    text = _without_executable_field(field)
    path = tmp_path / "run.json"
    path.write_bytes(text)
    code = main(["report", str(path), "--md", str(tmp_path / "run.md")])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err[-600:]
    assert code == 0 and (tmp_path / "run.md").exists()
    assert path.read_bytes() == text

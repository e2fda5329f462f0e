"""Property-based fuzzing of what users feed scanbench: mutated results files given to
`scanbench report` and `scanbench gate --results`, and mutated gate files. Never a
traceback; exit 0 only when no NaN, negative or non-numeric time could be rendered."""

from __future__ import annotations

import copy
import json
import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scanbench.cli.main import main
from tests.support.paths import DATA, REPO_ROOT

BASE = json.loads((DATA / "toy-failed.json").read_text())
GATES = REPO_ROOT / "bench" / "gates.toml"

FIELDS = [  # paths into a results file that reports and the gate read
    ("records", 0, "stats", "median"),
    ("records", 0, "stats", "q25"),
    ("records", 0, "stats", "iqr"),
    ("records", 0, "samples_s"),
    ("records", 0, "samples_s", 0),
    ("records", 0, "device"),
    ("records", 0, "size_params"),
    ("records", 0, "work"),
    ("records", 0, "work", "elements"),
    ("records", 0, "prepare_s"),
    ("records", 0, "status"),
    ("records", 0, "seed"),
    ("records", 0, "backend"),
    ("records", 0, "counts"),
    ("records", 0, "decomposition"),
    ("records", 0, "interference"),
    ("records", 1, "error"),
    ("records", 1, "size_params"),
    ("records", 0),
    ("records",),
    ("environment",),
    ("environment", "memory_bandwidth"),
    ("environment", "memory_bandwidth", "bytes_per_s"),
    ("environment", "versions"),
    ("environment", "hostname"),
    ("invocation",),
    ("invocation", "throughput_units"),
    ("invocation", "baselines"),
    ("schema_version",),
]
VALUES = st.one_of(
    st.sampled_from([float("nan"), float("inf"), -1.0, -1e-3, 0.0, None, True, "1.5", "x"]),
    st.sampled_from([[], {}, [1, "a"], {"a": "b"}, 10**30, -(10**30)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
)


def mutated(path: tuple, value) -> dict:
    data = copy.deepcopy(BASE)
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


BAD_TIME = re.compile(r"\bnan\b|\binf\b|\| -\d", re.IGNORECASE)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(path=st.sampled_from(FIELDS), value=VALUES)
@example(path=("records", 0, "stats", "median"), value=2.2250738585072014e-308)  # inf/s
def test_report_on_a_mutated_results_file(tmp_path, capsys, path, value):
    source = tmp_path / "run.json"
    source.write_text(json.dumps(mutated(path, value)))
    out = tmp_path / "out.md"
    out.unlink(missing_ok=True)
    code = main(["report", str(source), "--md", str(out)])
    err = capsys.readouterr().err
    assert code in (0, 2), err
    if code == 2:
        assert err.startswith("scanbench: error: ") and err.count("\n") == 1, err
        return
    assert not BAD_TIME.search(out.read_text()), out.read_text()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(path=st.sampled_from(FIELDS), value=VALUES)
def test_gate_on_a_mutated_results_file(tmp_path, capsys, path, value):
    source = tmp_path / "run.json"
    source.write_text(json.dumps(mutated(path, value)))
    gates = tmp_path / "gates.toml"
    gates.write_text('[settings]\ncounts_file = "counts.toml"\n')
    (tmp_path / "counts.toml").write_text(
        '[[count]]\nscenario = "tridiagonal"\nbackend = "scanned-time-major"\n'
        'size = "smoke"\ndtype = "float64"\ndispatches = 1\n'
    )
    # a count rule is decided on the stored run (an invariant is measured afresh)
    code = main(["gate", "--gates", str(gates), "--results", str(source)])
    err = capsys.readouterr().err
    assert code in (1, 2), err  # the toy run holds no TDMA cells: a failed rule, or bad input
    if code == 2:
        assert err.startswith("scanbench: error: ") and err.count("\n") == 1, err


SETTINGS = ["blocks", "samples_per_block", "delta", "floor_s", "confidence", "block_time_s"]


@settings(max_examples=60, deadline=None)
@given(key=st.sampled_from(SETTINGS), value=VALUES)
def test_gate_settings_are_validated(key, value, tmp_path_factory):
    import tomli_w

    from scanbench.api import HarnessError
    from scanbench.gate.rules import load_gates

    path = tmp_path_factory.mktemp("gates") / "gates.toml"
    try:
        text = tomli_w.dumps({"settings": {key: value}})
    except (TypeError, ValueError):
        return  # not representable in TOML (None)
    path.write_text(text)
    try:
        gates = load_gates(path)
    except HarnessError as error:
        assert key in str(error)
        return
    number = getattr(gates.settings, key)
    assert isinstance(number, int | float) and number == number  # not NaN
    assert number >= 0 and number != float("inf")
    if key in ("blocks", "samples_per_block", "delta"):
        assert number > 0
    if key == "confidence":
        assert 0.5 < number < 1


def test_the_fuzzed_base_file_is_valid(tmp_path, capsys):
    assert main(["report", str(DATA / "toy-failed.json"), "--md", str(tmp_path / "o.md")]) == 0


pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

"""The invocation record: every committed results file still loads, what is written reads
back the same, older keys are migrated, and a wrong field is named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scanbench.api import StoreError
from scanbench.cells import Cell
from scanbench.errors import SchemaVersionError
from scanbench.invocation import (
    INVOCATION_VERSION,
    CommandLine,
    Invocation,
    NotebookCall,
    Plan,
    ScenarioFacts,
)
from scanbench.results import load_run
from scanbench.sampling import TimingConfig
from tests.support.paths import DATA, REPO_ROOT

ROOT = REPO_ROOT
COMMITTED = sorted([*ROOT.glob("docs/results/*.json"), *DATA.glob("*.json")])


@pytest.mark.parametrize("path", COMMITTED, ids=lambda path: path.name)
def test_every_committed_results_file_loads_and_writes_back_what_it_read(path):
    stored = json.loads(path.read_text())["invocation"]
    invocation = load_run(path).invocation
    assert invocation.plan is not None and invocation.plan.cells
    assert isinstance(invocation.origin, CommandLine) and invocation.scenarios
    written = invocation.to_json()
    assert written["schema_version"] == INVOCATION_VERSION
    assert Invocation.from_json(written) == invocation
    # the same keys (the version added, and for older files the settings they lacked)
    added = {"schema_version", "overlap", "count_parts", "remeasure"}
    assert set(stored) <= set(written) and set(written) - set(stored) <= added
    assert written["cells"][0]["source"].endswith(stored["cells"][0]["source"].rsplit("/")[-1])


def test_a_command_line_plan_reads_back_the_same():
    cell = Cell("toy", "good", "smoke", "float64", 3, "/x/toy.py:SCENARIO", 2, (("k", 1),))
    invocation = Invocation(
        {"toy": ScenarioFacts("/x/toy.py:SCENARIO", "items", "good", "a toy", {"m": "./m.py"})},
        Plan((cell,), TimingConfig(min_count=5), 60.0, False, False, True),
        origin=CommandLine(("run", "--size", "smoke"), ("smoke",), (2,), 3),
        resumed_with_differences=("hostname 'a' -> 'b'",),
    )
    assert Invocation.from_json(json.loads(json.dumps(invocation.to_json()))) == invocation


def test_a_notebook_call_reads_back_the_same_and_has_no_plan():
    call = NotebookCall("scanbench.notebook.compare", "in-process", "rtol 1e-6", TimingConfig())
    invocation = Invocation({"f": ScenarioFacts("<in-memory: f>", None, "loop")}, origin=call)
    data = json.loads(json.dumps(invocation.to_json()))
    assert "cells" not in data and data["timing"]["min_count"] == 3
    assert Invocation.from_json(data) == invocation


def test_the_oldest_keys_are_migrated():
    old = {
        "argv": ["run"],
        "throughput_units": {"tridiagonal": "systems"},
        "baselines": {"tridiagonal": "sequential-jax"},
        "cells": [
            {"scenario": "toy", "backend": "good", "size": "smoke", "dtype": "float64",
             "scenario_file": "tests/scenario_files/toy.py"}
        ],
        "timing": {"warmup": 1},
        "timeout_s": 1800.0,
        "probes": True,
    }  # fmt: skip
    invocation = Invocation.from_json(old)
    assert invocation.scenarios == {"tridiagonal": ScenarioFacts("", "systems", "sequential-jax")}
    (cell,) = invocation.plan.cells
    assert cell.source == f"{(Path.cwd() / 'tests/scenario_files/toy.py').resolve()}:SCENARIO"
    assert not invocation.plan.overlap and not invocation.plan.count_parts
    written = invocation.to_json()
    assert "throughput_units" not in written and written["scenarios"]["tridiagonal"]["baseline"]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"timeout_s": "soon"}, "field 'invocation.timeout_s' must be a number, got 'soon'"),
        ({"probes": 1}, "field 'invocation.probes' must be true or false"),
        ({"cells": [{"scenario": "toy"}]}, "field 'invocation.cells' cannot be read"),
        ({"cells": [{**{"scenario": "t", "backend": "b", "size": "s", "dtype": "d"},
                     "cache": "tepid"}]}, "unknown --cache mode 'tepid'"),
        ({"timing": {"min_count": 0}}, "field 'invocation.timing' cannot be read"),
        ({"scenarios": {"toy": {"source": 3}}}, "field 'invocation.scenarios.toy' must be an"),
        ({"growth": {"sweeps": []}}, "field 'invocation.growth.budget_s' is missing"),
        ({"argv": "run"}, "field 'invocation.argv' must be strings"),
    ],
)  # fmt: skip
def test_a_wrong_field_is_named(change, says):
    stored = {**Invocation(origin=CommandLine(("run",))).to_json(), **Plan(()).to_json()}
    with pytest.raises(StoreError) as raised:
        Invocation.from_json({**stored, **change})
    assert says in str(raised.value)


def test_an_invocation_of_a_later_version_is_refused_as_another_schema(tmp_path):
    source = DATA / "toy-failed.json"
    data = json.loads(source.read_text())
    data["invocation"]["schema_version"] = INVOCATION_VERSION + 1
    path = tmp_path / "later.json"
    path.write_text(json.dumps(data))
    with pytest.raises(
        SchemaVersionError, match=f"invocation schema version {INVOCATION_VERSION + 1}"
    ):
        load_run(path)

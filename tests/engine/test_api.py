"""The public API rejects malformed scenarios and names with clear errors."""

from __future__ import annotations

import dataclasses

import pytest

from scanbench.api import Backend, InputError, Record, Scenario, Size, Strategy, UnknownNameError
from scanbench.scenarios.tridiagonal import SCENARIO


def test_size_is_frozen_and_names_missing_parameters():
    size = Size("s", {"n": 3})
    assert size["n"] == 3
    with pytest.raises(TypeError):
        size.params["n"] = 4
    message = "unknown size parameter 'm' for s; choose one of: n"
    with pytest.raises(UnknownNameError, match=message):
        size["m"]


def test_scenario_requires_smoke_and_default_sizes():
    with pytest.raises(InputError, match="must define a 'smoke' size"):
        dataclasses.replace(SCENARIO, sizes={"default": SCENARIO.sizes["default"]})


def test_backend_key_must_match_its_name():
    backend = SCENARIO.backend("vmapped")
    with pytest.raises(InputError, match="registered as 'other' is named 'vmapped'"):
        dataclasses.replace(SCENARIO, backends={"other": backend})


def test_scenario_rejects_unknown_dtypes():
    with pytest.raises(UnknownNameError, match="unknown dtype 'int8'"):
        dataclasses.replace(SCENARIO, dtypes=("int8",))


def test_record_status_is_checked():
    with pytest.raises(UnknownNameError, match="unknown status 'done'"):
        Record("s", "b", "scanned", "jax", "smoke", "float32", 0, status="done")


def test_backend_runs_at():
    backend = Backend("b", Strategy.LIBRARY, "scipy", lambda i, s: i, lambda p: p)
    assert backend.runs_at("anything")
    limited = dataclasses.replace(backend, sizes=frozenset({"smoke"}))
    assert limited.runs_at("smoke") and not limited.runs_at("default")


def test_every_strategy_value():
    assert [str(s) for s in Strategy] == [
        "sequential",
        "vmapped",
        "scanned",
        "numba",
        "library",
        "sharded",
        "roofline",
    ]


def test_scenario_lookup_errors_list_choices():
    assert isinstance(SCENARIO, Scenario)
    with pytest.raises(UnknownNameError, match="choose one of: smoke, default, long, wide"):
        SCENARIO.size("tiny")

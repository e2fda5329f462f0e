"""How a backend runs its dependent chains (`scanbench.api.Backend.chains`), declared
true: checked against the chain floor measured in the committed results, as the declared
cores are checked against the measured ones."""

from __future__ import annotations

import dataclasses

import pytest

from scanbench import Backend, InputError, Param, Strategy, chained, parametric
from scanbench.evidence import CHAIN_MARGIN, chain_floor
from scanbench.findings import facts_of
from scanbench.results import Run, load_run
from scanbench.scenarios.tridiagonal import SCENARIO
from tests.support.paths import REPO_ROOT

COMMITTED = ("smoke", "default")


def _run(name: str) -> Run:
    return load_run(REPO_ROOT / "docs" / "results" / f"{name}.json")


def wrong_declarations(run: Run) -> list[str]:
    """Each row declared to run its chains one after another whose median is below the
    floor of doing so (steps x the run's measured step, over its measured cores): it
    overlaps them, whatever it declares."""
    wrong = []
    for record in run.records:
        if record.chains != "serial" or not record.work.get("chains"):
            continue
        facts = facts_of(record, run.environment)
        floor = chain_floor(facts) if facts is not None else None
        assert floor is not None, f"{record.backend}: no chain floor (the run measured none?)"
        if floor.seconds > CHAIN_MARGIN * facts.median_s:
            wrong.append(
                f"{record.size}/{record.backend}: declared serial, floor "
                f"{floor.seconds * 1e3:.3g} ms above its {facts.median_s * 1e3:.3g} ms median"
            )
    return wrong


@pytest.mark.parametrize("name", COMMITTED)
def test_no_backend_declared_serial_runs_faster_than_its_chain_floor(name):
    run = _run(name)
    assert "chain_step_s" in run.environment["rates"], "the run measured the dependent step"
    serial = [r for r in run.records if r.chains == "serial" and r.status == "ok"]
    assert len(serial) >= 3
    assert wrong_declarations(run) == []


def test_a_backend_that_interleaves_declared_serial_is_caught():
    """numba-time-major sweeps 256 systems per inner loop: at smoke it runs in less than
    its chains would take one after another, so a serial declaration is refuted."""
    run = _run("smoke")
    planted = tuple(
        dataclasses.replace(r, chains="serial") if r.backend == "numba-time-major" else r
        for r in run.records
    )
    (wrong,) = wrong_declarations(dataclasses.replace(run, records=planted))
    assert wrong.startswith("smoke/numba-time-major: declared serial")


def test_every_backend_of_a_scenario_with_chains_declares_how_it_runs_them():
    size = next(iter(SCENARIO.sizes.values()))
    assert SCENARIO.work(size, "float64")["chains"] == size["batch"]
    undeclared = [name for name, b in SCENARIO.backends.items() if b.chains is None]
    assert undeclared == []
    assert SCENARIO.backends["numba-serial"].chains == "serial"
    assert SCENARIO.backends["numba-time-major"].chains == "interleaved"


def _backend(name: str = "b", **fields) -> Backend:
    return Backend(name, Strategy.NUMBA, "numba", lambda i, s: i, lambda p: p, **fields)


def test_a_declaration_outside_the_allowed_values_is_refused_in_one_line():
    with pytest.raises(InputError, match="chains must be one of serial, interleaved or None"):
        _backend(chains="sequential")


def test_a_declaration_is_kept_when_the_backend_is_built_with_other_parameters():
    backend = chained(
        parametric(lambda block: _backend(f"b{block}"), block=Param(8, choices=(8, 16))),
        "interleaved",
    )
    assert backend.chains == "interleaved"
    assert backend.with_params({"block": 16}).chains == "interleaved"

"""The diagnosis score's reading of a stored run and its verdicts (the measurement itself
is `paired_backends.paired`, the gate's interleaved method, run by hand under the lock)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scanbench.results import load_run

from .score_diagnosis import APPLIES, as_predicted, leads, verdict

SMOKE = Path(__file__).resolve().parents[2] / "docs" / "results" / "smoke.json"


def test_every_jax_backend_has_a_lead_and_a_named_variant_is_a_backend_of_its_table():
    run = load_run(SMOKE)
    found = leads(SMOKE)
    jax_cells = {
        (r.scenario, r.backend)
        for r in run.records
        if r.engine == "jax" and r.status == "ok" and r.strategy != "roofline"
    }
    assert {(lead.scenario, lead.backend) for lead in found} == jax_cells
    medians = {(r.scenario, r.backend): r.stats["median"] for r in run.records if r.stats}
    for lead in found:
        if lead.variant is None:
            assert lead.predicted is None
            continue
        assert (lead.scenario, lead.variant) in medians
        if lead.predicted_high is None:  # a priced overhead: removing it gains at least this
            assert lead.predicted == lead.predicted_low > 1.0
            assert (lead.scenario, lead.backend, lead.cost) in APPLIES
            continue
        assert lead.predicted_low <= lead.predicted <= lead.predicted_high
        # the prediction is the ratio of the two cells' medians (the neighbour's, as named)
        mine, theirs = medians[lead.scenario, lead.backend], medians[lead.scenario, lead.variant]
        assert lead.predicted == pytest.approx(mine / theirs, rel=0.05)


def test_a_gain_helped_only_when_its_interval_is_above_one():
    row = {"gain": 1.4, "gain_low": 1.2, "gain_high": 1.6, "predicted": 1.5,
           "predicted_low": 1.45, "predicted_high": 1.55}  # fmt: skip
    assert verdict(row) == "helped" and as_predicted(row) is True
    assert verdict({**row, "gain_low": 0.98}) == "no gain"
    assert as_predicted({**row, "gain_high": 1.3}) is False  # below the predicted interval
    assert verdict({"gain": None}) == "not applied" and as_predicted({"gain": None}) is None
    floor = {**row, "predicted": 1.5, "predicted_low": 1.5, "predicted_high": None}
    assert as_predicted(floor) is True and as_predicted({**floor, "gain_high": 1.45}) is False

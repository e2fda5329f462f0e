"""A worker's record is checked as it arrives (`scanbench.execution.launcher.invalid_record`): one
that would make the results file unreadable fails its own cell, with the field named."""

from __future__ import annotations

import pytest

from scanbench.api import Record
from scanbench.cells import Cell
from scanbench.execution import launcher
from scanbench.execution.processes import Finished
from scanbench.sampling import TimingConfig

CELL = Cell("tridiagonal", "sequential-numpy", "smoke", "float64", 0)
FIELDS = {"scenario": "tridiagonal", "backend": "sequential-numpy", "strategy": "sequential"}
FIELDS |= {"engine": "numpy", "size": "smoke", "dtype": "float64", "seed": 0, "status": "ok"}


@pytest.mark.parametrize(("first_call_s", "status"), [(0.5, "ok"), (-0.5, "failed")])
def test_a_record_a_report_would_refuse_fails_its_cell(monkeypatch, first_call_s, status):
    written = Record(first_call_s=first_call_s, samples_s=(1e-3,) * 3, **FIELDS).to_json()
    monkeypatch.setattr(launcher, "_run_worker", lambda *a, **k: (written, None, Finished(0, "")))
    record = launcher.run_cell_in_worker(CELL, TimingConfig(), 10.0)
    assert record.status == status, record.error
    assert launcher.invalid_record(record.to_json()) is None  # what is stored reads back
    if status == "failed":
        assert "'first_call_s' must be a finite number >= 0 or null, got -0.5" in record.error

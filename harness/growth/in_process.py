"""A sweep of a user's functions (``scanbench.compare(..., grow=...)``): the same points,
budget, fits and confirmations as a grown ``scanbench run``, measured by the notebook
API's own measurement (in this process, or a fresh worker per call with ``isolate``).

The points are measured in order, each function at a point before the next point, so
every function's next point is predicted from the ones before it (`scanbench.growth.
budget`); then the crossovers' confirmation points are measured (those the caller can
build arguments for), and everything is analysed (`scanbench.growth.analysis`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..api import Record, Scenario, Status
from .analysis import SweepAnalysis, analyse
from .budget import decide, reason, skipped_record
from .points import Sweep

Measure = Callable[[str, str], Record]  # (function name, size name) -> its record


def _point(
    scenario: Scenario,
    key: str,
    sweep: Sweep,
    units: int,
    records: Sequence[Record],
    measure: Measure,
    budget_s: float,
) -> Record:
    """One function at one point: measured, or skipped over the budget."""
    size = scenario.size(sweep.size_name(units))
    measured = [
        (value, record.stats["median"])
        for record in records
        if record.backend == key and record.status == Status.OK and "median" in record.stats
        and (value := sweep.value_of(record.size, record.size_params)) is not None
    ]  # fmt: skip
    decision = decide(measured, units, budget_s)
    if decision.measure:
        return measure(key, size.name)
    return skipped_record(
        scenario,
        scenario.backend(key),
        size,
        sweep.dtype,
        reason(decision, sweep.axis, units, budget_s),
        decision.predicted_s,
        seed=0,
    )


def sweep_functions(
    scenario: Scenario,
    sweep: Sweep,
    measure: Measure,
    budget_s: float,
    confirmable: Callable[[int], bool],
    confidence: float = 0.95,
) -> tuple[list[Record], SweepAnalysis]:
    """Every function of ``scenario`` at every point of ``sweep``, then at the crossovers'
    confirmation points ``confirmable`` accepts; the records and their analysis."""
    records: list[Record] = []
    for units in sweep.values:
        for key in scenario.backends:
            records.append(_point(scenario, key, sweep, units, records, measure, budget_s))
    analysis = analyse(sweep, records, confidence)
    for line, units in analysis.confirmations_missing():
        if confirmable(units):
            records.append(_point(scenario, line.backend, sweep, units, records, measure, budget_s))
    return records, analyse(sweep, records, confidence)

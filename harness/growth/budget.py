"""Which points of a sweep are measured: those whose one call is predicted to fit in the
budget (``--grow-budget S``, seconds per call), predicted from the points before them.

A backend's next point is predicted from its points measured so far
(`scanbench.growth.fit.predict_call_s`: nothing with none, so the first point is always
measured; proportional growth from one, an upper bound of any line through it; the k = 1
fit of two or more). A backend that can be measured on part of the work
(`scanbench.api.Backend.reducible_to` units of the scenario's ``count_along``) is held
to the budget by what measuring it costs: its predicted call x the part it would be
measured on; the worker then says, in the record, that it measured part and scaled it
(openly, "≈" in the reports). A point over the budget is not measured: it is stored as a
*skipped* record saying so, with the prediction, and listed in the reports.

Example:
    >>> decide([(2, 0.01), (4, 0.02)], at=256, budget_s=1.0).measure
    False
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..api import Backend, Record, Scenario, Size
from ..units import format_seconds
from .fit import predict_call_s

PREDICTED = "growth_predicted_s"  # Record.extra key: a skipped point's predicted call
DEFAULT_BUDGET_S = 1.0  # --grow-budget when not given: seconds per call


@dataclasses.dataclass(frozen=True)
class Decision:
    """Whether to measure a point, and why.

    Attributes:
        predicted_s: one whole call at the point (None: nothing to predict from yet).
        part: the share of the work it would be measured on (1.0: whole).
        basis: the points the prediction comes from.
    """

    measure: bool
    predicted_s: float | None
    part: float
    basis: tuple[int, ...]


def decide(
    measured: Sequence[tuple[int, float]], at: int, budget_s: float, part: float = 1.0
) -> Decision:
    """The decision at ``at`` from ``measured`` (units, median) of the same backend."""
    units = [units for units, _ in measured]
    predicted = predict_call_s(units, [median for _, median in measured], at)
    if predicted is None:
        return Decision(True, None, part, ())
    return Decision(predicted * part <= budget_s, predicted, part, tuple(sorted(units)))


def part_measured(scenario: Scenario, backend: Backend, size: Size) -> float:
    """The share of a call a reducible backend is measured on at ``size`` (1.0 for the
    others; see `scanbench.api.Backend.reducible_to`)."""
    along, units = scenario.count_along, backend.reducible_to
    if along is None or units is None or size[along] <= units:
        return 1.0
    return units / size[along]


def reason(decision: Decision, axis: str, at: int, budget_s: float) -> str:
    """The skipped record's message: the prediction, the budget, what it came from."""
    basis = ", ".join(str(units) for units in decision.basis)
    part = ""
    if decision.part < 1.0:
        cost = format_seconds(decision.predicted_s * decision.part)
        part = f" (measured on {decision.part:.2g} of the work: {cost})"
    return (
        f"skipped at {axis} = {at}: one call predicted {format_seconds(decision.predicted_s)}"
        f"{part} > --grow-budget {format_seconds(budget_s)} (from {axis} = {basis})"
    )


def skipped_record(
    scenario: Scenario,
    backend: Backend,
    size: Size,
    dtype: str,
    message: str,
    predicted_s: float | None,
    **cell: object,
) -> Record:
    """The record of a point the budget skipped: what the cell was (so reports place it)
    and why; ``cell``: its seed, devices, params and cache."""
    return Record(
        scenario=scenario.name,
        backend=backend.name,
        strategy=str(backend.strategy),
        engine=backend.engine,
        size=size.name,
        dtype=dtype,
        status="skipped",
        error=message,
        size_params=dict(size.params),
        work=dict(scenario.work(size, dtype)),
        checked=backend.checked,
        parallel=backend.parallel or backend.strategy == "sharded",
        extra={PREDICTED: predicted_s, "phases_s": {}},
        **cell,
    )

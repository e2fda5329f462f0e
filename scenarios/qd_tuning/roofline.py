"""The ``roofline`` of the QD scenarios: their MPPI arithmetic alone, as fast as Numba
runs it (`scanbench.scenarios.mppi_tuning.roofline`).

A call's work is emitters x batch x generations evaluations, each E episodes of S
control steps of K rollouts of T RK4 steps: the ``dynamics_steps`` of `problem.work`.
The MPPI roofline does exactly that many steps when its population is the QD population
(emitters x batch) and its generations the QD generations: no RNG, no weighting, no
closed loop, no measures, no archive. The reports give every backend its "x roofline"
against it and leave it out of the ranking.
"""

from __future__ import annotations

import dataclasses

from scanbench import Backend

from ..mppi_tuning.problem import MppiInputs
from ..mppi_tuning.roofline import roofline_backend as mppi_roofline
from .problem import QdInputs


def as_mppi(inputs: QdInputs) -> MppiInputs:
    """The MPPI inputs whose batches are this QD call's rollouts."""
    qd = inputs.config
    population = qd.emitters * qd.batch
    return MppiInputs(dataclasses.replace(qd.mppi, population=population), inputs.seed)


def roofline_backend(name: str) -> Backend:
    return mppi_roofline(name, as_mppi)

"""CMA-ME tuning of MPPI as a scenario: sizes, inputs, the archive's grid, work units.

The "inputs" are the static configuration and the seed. Every evaluation uses the same
episode keys, `evaluation_keys(root)`: a solution's values do not depend on the
generation that evaluated it, so any reported solution can be re-evaluated by the
reference (`reference64`). The optimizers draw from their own seeded streams (pyribs:
`numpy_seeds`; the JAX CMA-ME: `optimizer_key`), which differ between backends: the
check never compares two backends' archives cell by cell.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import numpy as np

from scanbench import Axis, InputError, Size, UnknownNameError
from scanbench.scenarios.mppi_tuning.controller import Config

DT = 0.1
# the grid's measure ranges: effort in [0, 1]; the mean angle error (in units of pi) of a
# pole that starts hanging stays above ~0.7 over the short runs of these sizes, so its
# range starts at 0.5 (a value below is clipped into the first column, as pyribs does)
MEASURE_LOWER = (0.0, 0.5)
MEASURE_UPPER = (1.0, 1.0)
# QD score offset: objective = -mean cost; a pole left hanging costs about 10 per step
# (pi^2 for the angle alone), so objective - offset > 0 for every solution seen
QD_SCORE_OFFSET = -20.0
# pyribs' GridArchive epsilon: added before the floor that maps measures to cells
EPSILON = 1e-6


@dataclasses.dataclass(frozen=True)
class QdConfig:
    """Static CMA-ME settings.

    Attributes:
        mppi: the MPPI controller and episode settings (``mppi_tuning``'s ``Config``).
        emitters: CMA-ES emitters, each asking ``batch`` solutions per generation.
        batch: solutions per emitter per generation.
        generations: scheduler iterations (ask, evaluate, tell) per call.
        cells: the grid (effort bins, angle bins).
        sigma0: every emitter's initial (and restart) step size.
    """

    mppi: Config
    emitters: int
    batch: int
    generations: int
    cells: tuple[int, int]
    sigma0: float = 0.5

    @property
    def population(self) -> int:
        return self.emitters * self.batch

    @property
    def cell_count(self) -> int:
        return self.cells[0] * self.cells[1]


class QdInputs(NamedTuple):
    config: QdConfig
    seed: int


class QdResult(NamedTuple):
    """What every backend returns (values are (objective, effort, angle))."""

    best_solution: Any  # (G, 3): the best solution evaluated in each generation
    best_value: Any  # (G, 3): its values
    elite_solution: Any  # (C, 3): the archive, one row per cell (zeros where empty)
    elite_value: Any  # (C, 3)
    occupied: Any  # (C,) bool
    qd_score: Any  # (G,): sum over occupied cells of (objective - offset), per generation


def _size(name: str, description: str, *, emitters, batch, generations, cells, **mppi) -> Size:
    params = {"emitters": emitters, "batch": batch, "generations": generations}
    params["population"] = emitters * batch  # the growth axis (AXES); make_config checks it
    grid = {"effort_cells": cells[0], "angle_cells": cells[1]}
    return Size(name, {**params, **grid, "dt": DT, **mppi}, description)


# (emitters, batch, generations, grid cells) and the MPPI episode of each size; the grids
# are square (`reference64.describe` draws the archive from its flat cell count)
_QD = {
    "smoke": (1, 4, 2, (5, 5)),
    "default": (1, 20, 10, (10, 10)),  # the tuner's own population of 20
    "large": (15, 36, 20, (20, 20)),
}
_EPISODES = {  # samples, horizon, control steps, episodes
    "smoke": (16, 8, 5, 1),
    "default": (64, 16, 10, 1),
    "large": (256, 20, 20, 2),
}
_DESCRIPTIONS = {
    "smoke": "tests and CI",
    "default": "nox -s bench: the tuner's own population of 20",
    "large": "a GPU or a patient CPU: 15 emitters x 36",
}


def sizes(system: str) -> dict[str, Size]:
    found = {}
    for name, (emitters, batch, generations, cells) in _QD.items():
        samples, horizon, control_steps, episodes = _EPISODES[name]
        found[name] = _size(
            name,
            _DESCRIPTIONS[name],
            emitters=emitters,
            batch=batch,
            generations=generations,
            cells=cells,
            system=system,
            samples=samples,
            horizon=horizon,
            control_steps=control_steps,
            episodes=episodes,
        )
    return found


def _grown_population(base: Size, value: int) -> dict[str, Any]:
    """``population`` = value: the batch grows, the emitters stay (``value`` must be a
    multiple of them, with a batch of 2 or more)."""
    emitters = base["emitters"]
    if value % emitters or value // emitters < 2:
        raise InputError(
            f"axis 'population' of size {base.name!r} takes multiples of its {emitters} "
            f"emitters with a batch >= 2 (>= {2 * emitters}), got {value}; grow `batch` instead"
        )
    return {**base.params, "population": value, "batch": value // emitters}


def _grown_batch(base: Size, value: int) -> dict[str, Any]:
    return {**base.params, "batch": value, "population": base["emitters"] * value}


def _grown_emitters(base: Size, value: int) -> dict[str, Any]:
    return {**base.params, "emitters": value, "population": value * base["batch"]}


AXES = {
    "population": Axis(
        "population",
        "solutions",
        "emitters x batch: solutions evaluated per generation (the batch grows)",
        minimum=2,
        derive=_grown_population,
    ),
    "batch": Axis("batch", "solutions", "solutions per emitter per generation", 2, _grown_batch),
    "emitters": Axis("emitters", "emitters", "CMA-ES emitters", derive=_grown_emitters),
    "generations": Axis("generations", "generations", "G: scheduler iterations per call"),
}


def make_config(size: Size) -> QdConfig:
    p = dict(size.params)
    qd = {name: p.pop(name) for name in ("emitters", "batch", "generations")}
    population = p.pop("population")
    if population != qd["emitters"] * qd["batch"]:
        raise InputError(
            f"size {size.name!r}: population {population} must be emitters x batch "
            f"= {qd['emitters']} x {qd['batch']}"
        )
    cells = (p.pop("effort_cells"), p.pop("angle_cells"))
    mppi = Config(population=max(qd["batch"], 2), generations=qd["generations"], **p)
    return QdConfig(mppi=mppi, cells=cells, **qd)


def make_inputs(size: Size, seed: int, dtype: str) -> QdInputs:
    if dtype != "float32":
        raise UnknownNameError("dtype", dtype, ["float32"], "the QD tuning scenarios")
    return QdInputs(make_config(size), seed)


def work(size: Size, dtype: str) -> dict[str, float]:
    p = size.params
    evaluations = p["emitters"] * p["batch"] * p["generations"]
    steps = evaluations * p["episodes"] * p["control_steps"] * p["samples"] * p["horizon"]
    return {
        "evaluations": float(evaluations),
        "dynamics_steps": float(steps),
        "generations": float(p["generations"]),
    }


def root_key(seed: int) -> jax.Array:
    return jax.random.key_data(jax.random.key(seed))


def evaluation_keys(root: jax.Array, episodes: int) -> jax.Array:
    """The E episode keys every evaluation uses (common random numbers)."""
    return jax.random.split(jax.random.fold_in(root, 1), episodes)


def optimizer_key(root: jax.Array) -> jax.Array:
    """The JAX CMA-ME's own stream (asks, restarts)."""
    return jax.random.fold_in(root, 2)


def numpy_seeds(seed: int, emitters: int) -> tuple[int, list[int]]:
    """pyribs' seeds: the archive's (elite sampling on restarts) and each emitter's."""
    archive, *rest = np.random.SeedSequence(seed).generate_state(emitters + 1)
    return int(archive), [int(value) for value in rest]


def cell_index(measures: np.ndarray, cells: tuple[int, int]) -> np.ndarray:
    """pyribs' ``GridArchive.index_of`` in NumPy: measures (N, 2) -> flat cell (N,)."""
    lower, upper = np.asarray(MEASURE_LOWER), np.asarray(MEASURE_UPPER)
    dims = np.asarray(cells)
    grid = np.floor((dims * (np.asarray(measures, np.float64) - lower) + EPSILON) / (upper - lower))
    grid = np.clip(grid.astype(np.int64), 0, dims - 1)
    return grid[:, 0] * cells[1] + grid[:, 1]

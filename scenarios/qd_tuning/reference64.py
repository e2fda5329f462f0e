"""The float64 reference evaluation and the scenario's check.

`evaluate64` runs a solution's closed loop in NumPy float64 (np.sin and np.cos, not the
float32 polynomials of the JAX systems), on the standard-normal draws and starts the JAX
evaluation makes (`mppi_tuning.objective.episode_noise`, float32 values widened): an
evaluation independent of the backends' arithmetic.

The check (`check`) holds every backend to what it reports, whatever optimizer drove it:

- each generation's best solution and a sample of the archive's elites, re-evaluated:
  objective (relative) and measures (absolute) within the tolerances below;
- the archive: each elite sits in the cell its reported measures map to, and the last
  reported QD score is the sum over occupied cells of (objective - offset).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import numpy as np

from scanbench import ArchiveMap, MismatchError, compile_reference
from scanbench.scenarios.mppi_tuning.objective import episode_noise
from scanbench.scenarios.mppi_tuning.problem import REFERENCE_COMPILER_OPTIONS
from scanbench.scenarios.mppi_tuning.systems import CARTPOLE, PENDULUM

from .evaluation import (
    ANGLE_INDEX,
    MEASURE_NAMES,
    NOISE_MEAN_SCALE,
    SOLUTION_DIM,
    solution_bounds,
)
from .problem import (
    MEASURE_LOWER,
    MEASURE_UPPER,
    QD_SCORE_OFFSET,
    QdConfig,
    QdInputs,
    QdResult,
    evaluation_keys,
    root_key,
)

# Tolerances against the float64 evaluation. The closed loop amplifies float32 rounding
# (`mppi_tuning.problem.RTOL`: the same numbers, the same controller): the median over the
# checked solutions within the first, the worst within the second. The measures are means
# over the whole run, on [0, 1], so their errors are absolute.
RTOL_OBJECTIVE = (5e-3, 5e-2)
ATOL_MEASURES = (5e-3, 5e-2)
# the QD score is a float32 sum of C terms (pyribs: float64): relative
RTOL_QD_SCORE = 1e-5
# at most this many generations' best solutions and this many elites are re-evaluated
CHECKED_GENERATIONS = 12
CHECKED_ELITES = 12


def _wrap(theta: np.ndarray) -> np.ndarray:
    return theta - 2.0 * np.pi * np.round(theta / (2.0 * np.pi))


def _pendulum_f(s, u):
    p = PENDULUM
    theta, omega = s
    accel = (p["g"] / p["l"]) * np.sin(theta) - p["b"] * omega + u / (p["m"] * p["l"] ** 2)
    return omega, accel


def _pendulum_cost(s, u):
    theta, omega = s
    return _wrap(theta) ** 2 + 0.1 * omega**2 + 0.001 * u**2


def _cartpole_f(s, u):
    p = CARTPOLE
    _, velocity, theta, omega = s
    total = p["m_cart"] + p["m_pole"]
    sin, cos = np.sin(theta), np.cos(theta)
    temp = (u + p["m_pole"] * p["l"] * omega**2 * sin) / total
    alpha = (p["g"] * sin - cos * temp) / (p["l"] * (4.0 / 3.0 - p["m_pole"] * cos**2 / total))
    accel = temp - p["m_pole"] * p["l"] * alpha * cos / total
    return velocity, accel, omega, alpha


def _cartpole_cost(s, u):
    position, velocity, theta, omega = s
    return _wrap(theta) ** 2 + 0.1 * position**2 + 0.01 * (velocity**2 + omega**2) + 0.001 * u**2


SYSTEMS64 = {
    "pendulum": (_pendulum_f, _pendulum_cost, PENDULUM["u_max"]),
    "cartpole": (_cartpole_f, _cartpole_cost, CARTPOLE["u_max"]),
}


def _rk4(f, s, u, dt):
    def along(k, h):
        return tuple(a + h * b for a, b in zip(s, k, strict=True))

    k1 = f(s, u)
    k2 = f(along(k1, 0.5 * dt), u)
    k3 = f(along(k2, 0.5 * dt), u)
    k4 = f(along(k3, dt), u)
    return tuple(
        a + (dt / 6.0) * (b1 + 2.0 * b2 + 2.0 * b3 + b4)
        for a, b1, b2, b3, b4 in zip(s, k1, k2, k3, k4, strict=True)
    )


def _episode64(z, noise, x0, config: QdConfig) -> np.ndarray:
    """(mean cost, mean effort, mean angle) of one episode: noise (S, T, K), x0 (dim,)."""
    mppi = config.mppi
    f, cost, u_max = SYSTEMS64[mppi.system]
    lower, upper = solution_bounds()
    z = np.clip(np.asarray(z, np.float64), lower, upper)
    lambda_, sigma, mean = np.exp(z[0]), np.exp(z[1]), z[2] * NOISE_MEAN_SCALE * u_max
    x = tuple(np.float64(value) for value in x0)
    nominal = np.zeros(mppi.horizon)
    totals = np.zeros(3)
    for s in range(mppi.control_steps):
        controls = np.clip(nominal[:, None] + sigma * noise[s] + mean, -u_max, u_max)
        states = tuple(np.full(controls.shape[1], value) for value in x)
        costs = np.zeros(controls.shape[1])
        for t in range(mppi.horizon):
            states = _rk4(f, states, controls[t], mppi.dt)
            costs = costs + cost(states, controls[t])
        weights = np.exp(-(costs - costs.min()) / lambda_)
        nominal = controls @ (weights / weights.sum())
        u = nominal[0]
        nominal = np.concatenate([nominal[1:], [0.0]])
        x = _rk4(f, x, u, mppi.dt)
        angle = x[ANGLE_INDEX[mppi.system]]
        totals += (cost(x, u), (u / u_max) ** 2, abs(_wrap(angle)) / np.pi)
    return totals / mppi.control_steps


@dataclasses.dataclass(frozen=True)
class Reference:
    """The float64 evaluation of any solution on the scenario's episode keys."""

    inputs: QdInputs

    @functools.cached_property
    def draws(self) -> tuple[np.ndarray, np.ndarray]:
        """The episodes' noise (E, S, T, K) and starts (E, dim), as float64."""
        mppi = self.inputs.config.mppi
        keys = evaluation_keys(root_key(self.inputs.seed), mppi.episodes)
        lowered = jax.jit(lambda k: episode_noise(k, mppi)).lower(keys)
        noise, starts = compile_reference(lowered, REFERENCE_COMPILER_OPTIONS)(keys)
        return np.asarray(noise, np.float64), np.asarray(starts, np.float64)

    def evaluate64(self, solutions: np.ndarray) -> np.ndarray:
        """(objective, effort, angle) of each solution (N, 3) -> (N, 3), float64."""
        noise, starts = self.draws
        config = self.inputs.config
        values = []
        for z in np.asarray(solutions, np.float64):
            episodes = [_episode64(z, n, x0, config) for n, x0 in zip(noise, starts, strict=True)]
            cost, effort, angle = np.mean(episodes, axis=0)
            values.append((-cost, effort, angle))
        return np.asarray(values, np.float64).reshape(-1, 3)


def reference(inputs: QdInputs) -> Reference:
    return Reference(inputs)


def _spread(indices: np.ndarray, count: int) -> np.ndarray:
    """At most ``count`` of ``indices``, evenly spread, the last one included."""
    if len(indices) <= count:
        return indices
    return indices[np.linspace(0, len(indices) - 1, count).round().astype(int)]


def _shape_errors(output: QdResult, config: QdConfig) -> list[str]:
    g, c, d = config.generations, config.cell_count, SOLUTION_DIM
    expected = {
        "best_solution": (g, d),
        "best_value": (g, 3),
        "elite_solution": (c, d),
        "elite_value": (c, 3),
        "occupied": (c,),
        "qd_score": (g,),
    }
    return [
        f"{name} has shape {np.shape(getattr(output, name))}, expected {shape}"
        for name, shape in expected.items()
        if np.shape(getattr(output, name)) != shape
    ]


def check_archive(output: QdResult, config: QdConfig) -> None:
    """Each elite lies in its cell (within float32 rounding of the cell's bounds); the last
    QD score is the sum over occupied cells of (objective - offset)."""
    occupied = np.asarray(output.occupied, bool)
    values = np.asarray(output.elite_value, np.float64)
    cells = np.flatnonzero(occupied)
    lower, upper = np.asarray(MEASURE_LOWER), np.asarray(MEASURE_UPPER)
    dims = np.asarray(config.cells)
    width = (upper - lower) / dims
    grid = np.stack(np.unravel_index(cells, config.cells), axis=-1)
    low = np.where(grid == 0, -np.inf, lower + grid * width) - 1e-5
    high = np.where(grid == dims - 1, np.inf, lower + (grid + 1) * width) + 1e-5
    measures = values[cells, 1:]
    outside = np.flatnonzero(np.any((measures < low) | (measures > high), axis=1))
    if len(outside):
        cell = int(cells[outside[0]])
        raise MismatchError(
            f"{len(outside)} elites lie outside their cell, e.g. cell {cell} holds measures "
            f"{measures[outside[0]].tolist()}",
            float(len(outside)),
            0.0,
        )
    score = float(np.sum(values[cells, 0] - QD_SCORE_OFFSET))
    reported = float(np.asarray(output.qd_score, np.float64)[-1])
    error = abs(reported - score) / max(abs(score), 1.0)
    if not error <= RTOL_QD_SCORE:
        raise MismatchError(
            f"reported QD score {reported:.6g}, the archive's elites sum to {score:.6g}",
            error,
            RTOL_QD_SCORE,
        )


def _within(name: str, errors: np.ndarray, bounds: tuple[float, float], what: str) -> float:
    typical, worst_bound = bounds
    worst = int(np.argmax(errors))
    if not errors[worst] <= worst_bound:
        raise MismatchError(f"{what} {worst}: {name} differs from the float64 evaluation",
                            float(errors[worst]), worst_bound)  # fmt: skip
    median = float(np.median(errors))
    if not median <= typical:
        raise MismatchError(
            f"{name} differs from the float64 evaluation by a median {median:.3g} over "
            f"{len(errors)} solutions",
            median,
            typical,
        )
    return float(errors[worst])


def check(output: QdResult, expected: Reference, dtype: str) -> float:
    """Archive invariants, then the re-evaluated objectives and measures of each checked
    generation's best and a sample of elites. Returns the largest objective error."""
    config = expected.inputs.config
    problems = _shape_errors(output, config)
    if problems:
        raise MismatchError("; ".join(problems), float("inf"), 0.0)
    numbers = [np.asarray(getattr(output, name), np.float64) for name in QdResult._fields]
    if not all(np.all(np.isfinite(values)) for values in numbers):
        raise MismatchError("the QD result has non-finite values", float("inf"), 0.0)
    check_archive(output, config)
    generations = _spread(np.arange(config.generations), CHECKED_GENERATIONS)
    elites = _spread(np.flatnonzero(np.asarray(output.occupied, bool)), CHECKED_ELITES)
    solutions = np.concatenate(
        [np.asarray(output.best_solution)[generations], np.asarray(output.elite_solution)[elites]]
    )
    reported = np.concatenate(
        [np.asarray(output.best_value)[generations], np.asarray(output.elite_value)[elites]]
    ).astype(np.float64)
    recomputed = expected.evaluate64(solutions)
    objective_error = np.abs(reported[:, 0] - recomputed[:, 0]) / np.maximum(
        np.abs(recomputed[:, 0]), 1e-6
    )
    measure_error = np.max(np.abs(reported[:, 1:] - recomputed[:, 1:]), axis=1)
    worst = _within("the objective", objective_error, RTOL_OBJECTIVE, "checked solution")
    _within("a measure", measure_error, ATOL_MEASURES, "checked solution")
    return worst


def describe(output: QdResult) -> dict[str, Any]:
    """What a record stores: coverage, QD score per generation, the best objective, and
    the final archive's objective per cell (`ArchiveMap`: the HTML report's heatmap).

    The output does not carry its grid's shape: every size's grid is square
    (`problem.sizes`), so C cells are sqrt(C) x sqrt(C)."""
    occupied = np.asarray(output.occupied, bool)
    values = np.asarray(output.elite_value, np.float64)
    side = math.isqrt(occupied.size)
    if side * side != occupied.size:
        raise ValueError(
            f"the archive's grid must be square to be drawn, got {occupied.size} cells"
        )
    objective = np.where(occupied, values[:, 0], np.nan).reshape(side, side)
    grid = [[None if np.isnan(v) else round(float(v), 4) for v in row] for row in objective]
    ranges = tuple(zip(MEASURE_LOWER, MEASURE_UPPER, strict=True))
    archive = ArchiveMap(grid, MEASURE_NAMES, ranges)
    return {
        "coverage": float(occupied.mean()),
        "elites": int(occupied.sum()),
        "qd_score_per_generation": np.asarray(output.qd_score, np.float64).tolist(),
        "best_objective": float(values[occupied, 0].max()) if occupied.any() else None,
        **archive.to_output(),
    }

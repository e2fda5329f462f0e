"""The pyribs-driven backends: CMA-ME with pyribs' own archive, emitters and scheduler.

``sequential`` is the public tuner's loop (``autotune_qd.py``), written against the
current pyribs API: ``scheduler.ask()``, then ``for solution in solutions: result =
evaluate_fn(solution)``, one jitted evaluation and one host conversion per solution, then
``scheduler.tell(objective, measures)``. ``library`` keeps pyribs' ask/tell and evaluates
the whole population in one jitted call per generation.

pyribs is imported inside these functions only (its import costs seconds: only the
cells that use it pay). Its CMA-ES compiles Numba functions, uncached, on its first ask
and tell in a process: `_warm_pyribs` pays that in ``prepare`` (untimed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from scanbench import Backend, Size, Strategy, loop_backend

from .evaluation import (
    INITIAL_SOLUTION,
    NOISE_MEAN_SCALE,
    SOLUTION_DIM,
    evaluate,
    evaluate_population,
    solution_bounds,
)
from .problem import (
    EPSILON,
    MEASURE_LOWER,
    MEASURE_UPPER,
    QD_SCORE_OFFSET,
    QdConfig,
    QdInputs,
    QdResult,
    evaluation_keys,
    numpy_seeds,
    root_key,
)

Evaluator = Callable[[np.ndarray], np.ndarray]


def make_scheduler(config: QdConfig, seed: int):
    """A GridArchive over the fixed measure ranges, ``emitters`` CMA-ES emitters (pyribs'
    defaults: two-stage improvement ranking, "filter" selection, restart on no
    improvement from a random elite) and a Scheduler: the tuner's CMA-ME."""
    from ribs.archives import GridArchive
    from ribs.emitters import EvolutionStrategyEmitter
    from ribs.schedulers import Scheduler

    archive_seed, emitter_seeds = numpy_seeds(seed, config.emitters)
    archive = GridArchive(
        solution_dim=SOLUTION_DIM,
        dims=config.cells,
        ranges=list(zip(MEASURE_LOWER, MEASURE_UPPER, strict=True)),
        qd_score_offset=QD_SCORE_OFFSET,
        epsilon=EPSILON,
        seed=archive_seed,
    )
    emitters = [
        EvolutionStrategyEmitter(
            archive,
            x0=np.asarray(INITIAL_SOLUTION),
            sigma0=config.sigma0,
            ranker="2imp",
            batch_size=config.batch,
            seed=emitter_seed,
        )
        for emitter_seed in emitter_seeds
    ]
    return archive, Scheduler(archive, emitters)


def tune_with_pyribs(config: QdConfig, seed: int, evaluate_generation: Evaluator) -> QdResult:
    """G generations of pyribs CMA-ME; ``evaluate_generation(solutions) -> values``."""
    archive, scheduler = make_scheduler(config, seed)
    best_solution, best_value, qd_score = [], [], []
    for _ in range(config.generations):
        solutions = scheduler.ask()
        values = evaluate_generation(solutions)
        scheduler.tell(values[:, 0], values[:, 1:])
        best = int(np.argmax(values[:, 0]))
        best_solution.append(solutions[best])
        best_value.append(values[best])
        qd_score.append(archive.stats.qd_score)
    elites = archive.data(["index", "solution", "objective", "measures"], return_type="dict")
    cells = config.cell_count
    elite_solution = np.zeros((cells, SOLUTION_DIM), np.float32)
    elite_value = np.zeros((cells, 3), np.float32)
    occupied = np.zeros(cells, bool)
    index = np.asarray(elites["index"], np.int64)
    elite_solution[index] = elites["solution"]
    elite_value[index, 0] = elites["objective"]
    elite_value[index, 1:] = elites["measures"]
    occupied[index] = True
    return QdResult(
        np.asarray(best_solution, np.float32),
        np.asarray(best_value, np.float32),
        elite_solution,
        elite_value,
        occupied,
        np.asarray(qd_score, np.float64),
    )


def _warm_pyribs(config: QdConfig, seed: int) -> None:
    """One ask and tell on a throwaway scheduler: pyribs' Numba compile, untimed."""
    _, scheduler = make_scheduler(config, seed)
    solutions = scheduler.ask()
    scheduler.tell(np.zeros(len(solutions)), np.full((len(solutions), 2), 0.75))


def _sequential_prepare(inputs: QdInputs, size: Size) -> dict[str, Any]:
    config = inputs.config
    mppi = config.mppi
    keys = jax.device_put(evaluation_keys(root_key(inputs.seed), mppi.episodes))
    one = jax.jit(lambda k, z: evaluate(k, z, mppi))
    jax.block_until_ready(one(keys, np.zeros(SOLUTION_DIM)))  # compile for float64 rows
    _warm_pyribs(config, inputs.seed)

    def evaluate_generation(solutions: np.ndarray) -> np.ndarray:
        objectives, measures = [], []
        for solution in solutions:  # the tuner's loop: one call, one conversion each
            result = np.asarray(one(keys, solution))
            objectives.append(result[0])
            measures.append(result[1:])
        return np.column_stack([np.asarray(objectives), np.asarray(measures)])

    return {"inputs": inputs, "evaluate": evaluate_generation, "compiled": one}


def _library_prepare(inputs: QdInputs, size: Size) -> dict[str, Any]:
    config = inputs.config
    mppi = config.mppi
    keys = jax.device_put(evaluation_keys(root_key(inputs.seed), mppi.episodes))
    solutions = jnp.zeros((config.population, SOLUTION_DIM), jnp.float32)
    compiled = (
        jax.jit(lambda k, z: evaluate_population(k, z, mppi)).lower(keys, solutions).compile()
    )
    _warm_pyribs(config, inputs.seed)

    def evaluate_generation(solutions: np.ndarray) -> np.ndarray:
        return np.asarray(compiled(keys, np.asarray(solutions, np.float32)), np.float64)

    return {"inputs": inputs, "evaluate": evaluate_generation, "compiled": compiled}


def _run(prepared: dict[str, Any]) -> QdResult:
    inputs: QdInputs = prepared["inputs"]
    return tune_with_pyribs(inputs.config, inputs.seed, prepared["evaluate"])


def _pyribs_backend(name: str, strategy: Strategy, prepare, **kwargs) -> Backend:
    # skipped where pyribs is not installed: `scanbench.scenarios.qd_tuning.NEEDS`
    return loop_backend(name, strategy, prepare, _run, **kwargs)


def sequential_backend(name: str, **kwargs) -> Backend:
    return _pyribs_backend(name, Strategy.SEQUENTIAL, _sequential_prepare, **kwargs)


def library_backend(name: str, **kwargs) -> Backend:
    return _pyribs_backend(
        name,
        Strategy.LIBRARY,
        _library_prepare,
        executables=lambda prepared: {
            "evaluate_population": (prepared["compiled"], prepared["inputs"].config.generations)
        },
        **kwargs,
    )


def _numba_prepare(inputs: QdInputs, size: Size) -> dict[str, Any]:
    """pyribs with the float32 Numba evaluation (`numba_measures`), fed the JAX draws."""
    from scanbench.scenarios.mppi_tuning import numba_lanes  # imports Numba: these cells
    from scanbench.scenarios.mppi_tuning.objective import episode_noise

    from . import numba_measures

    config = inputs.config
    mppi = config.mppi
    numba_lanes.check_dt(mppi.dt)
    system = numba_lanes.SYSTEM_CODES[mppi.system]
    u_max = np.float32(mppi.dynamics.u_max)
    keys = evaluation_keys(root_key(inputs.seed), mppi.episodes)
    noise, starts = jax.jit(lambda k: episode_noise(k, mppi))(keys)
    noise, starts = np.asarray(noise, np.float32), np.asarray(starts, np.float32)
    lower, upper = solution_bounds()

    def evaluate_generation(solutions: np.ndarray) -> np.ndarray:
        z = np.clip(np.asarray(solutions, np.float32), lower, upper)
        lambdas, sigmas = np.exp(z[:, 0]), np.exp(z[:, 1])
        means = (z[:, 2] * np.float32(NOISE_MEAN_SCALE) * u_max).astype(np.float32)
        values = numba_measures.evaluate_solutions(
            system, lambdas, sigmas, means, noise, starts, u_max
        )
        return values.astype(np.float64)

    evaluate_generation(np.zeros((2, SOLUTION_DIM)))  # compile (or load the cache)
    _warm_pyribs(config, inputs.seed)
    return {"inputs": inputs, "evaluate": evaluate_generation}


def numba_backend(name: str, **kwargs) -> Backend:
    # numba_measures.evaluate_solutions runs prange over solutions: every core
    return _pyribs_backend(
        name, Strategy.NUMBA, _numba_prepare, engine="numba", parallel=True, **kwargs
    )

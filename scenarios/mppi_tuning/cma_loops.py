"""The ``cma`` package's CMA-ES driving either the Numba evaluation (``numba``, the
CPU-native reference) or the vmapped JAX evaluation (``library``: what a user would pick
instead of evosax). Same objective, same episode keys per generation, same bounds
(cma's own bound handling on the log-parameter box), same initial mean and step size.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from scanbench import Backend, Size, Strategy, loop_backend

from .controller import LOG_LOWER, LOG_UPPER, Config
from .objective import (
    episode_keys,
    episode_noise,
    evaluate_population,
    generation_key,
)
from .problem import MppiInputs
from .tuning import INITIAL_CANDIDATE, TuningResult

Evaluator = Callable[[jax.Array, np.ndarray], np.ndarray]


def tune_with_cma(config: Config, seed: int, evaluate_generation: Evaluator) -> TuningResult:
    """G generations of cma's CMA-ES; ``evaluate_generation(gen_key, population)``."""
    import cma

    options = {
        "popsize": config.population,
        "seed": seed + 1,  # cma treats seed 0 as "random"
        "bounds": [list(LOG_LOWER), list(LOG_UPPER)],
        "verbose": -9,
        "verb_log": 0,
        "verb_disp": 0,
    }
    strategy = cma.CMAEvolutionStrategy(list(INITIAL_CANDIDATE), config.sigma_init, options)
    root = jax.random.key_data(jax.random.key(seed))
    best_candidate, best_fitness = [], []
    for generation in range(config.generations):
        solutions = strategy.ask()
        population = np.asarray(solutions, np.float32)
        fitness = evaluate_generation(generation_key(root, generation), population)
        strategy.tell(solutions, fitness.tolist())
        best = int(np.argmin(fitness))
        best_candidate.append(population[best])
        best_fitness.append(fitness[best])
    return TuningResult(
        np.stack(best_candidate),
        np.asarray(best_fitness, np.float32),
        np.asarray(strategy.mean, np.float32),
    )


def _draws(config: Config):
    """The generation's noise and starts, jitted and compiled (the same draws every
    backend makes: `objective.episode_noise`)."""
    noise = jax.jit(lambda keys: episode_noise(keys, config))
    example = episode_keys(jax.random.key_data(jax.random.key(0)), config.episodes)
    jax.block_until_ready(noise(example))
    return lambda gen_key: noise(episode_keys(gen_key, config.episodes))


def _numba_prepare(inputs: MppiInputs, size: Size) -> dict[str, Any]:
    """The float32 lane kernel (`numba_lanes.evaluate_population`)."""
    from . import numba_lanes  # imports Numba: only the cells that use it

    config = inputs.config
    numba_lanes.check_dt(config.dt)
    system = numba_lanes.SYSTEM_CODES[config.system]
    u_max = np.float32(config.dynamics.u_max)
    draws = _draws(config)

    def evaluate_generation(gen_key, population):
        noise, starts = draws(gen_key)
        z = np.clip(np.asarray(population, np.float32), LOG_LOWER, LOG_UPPER)
        lambdas, sigmas = np.exp(z[:, 0]), np.exp(z[:, 1])
        noise, starts = np.asarray(noise, np.float32), np.asarray(starts, np.float32)
        return numba_lanes.evaluate_population(system, lambdas, sigmas, noise, starts, u_max)

    evaluate_generation(
        episode_keys(jax.random.key_data(jax.random.key(0)), 1)[0], np.zeros((2, 2))
    )
    return {"inputs": inputs, "evaluate": evaluate_generation}


def _numba_scalar_prepare(inputs: MppiInputs, size: Size) -> dict[str, Any]:
    """The float64 scalar loop (`numba_mppi`): a candidate's closed loop one sample at a
    time, as a first port from NumPy reads."""
    from . import numba_mppi  # imports Numba: only the cells that use it

    config = inputs.config
    numba_mppi.compile_for(config.system)
    draws = _draws(config)

    def evaluate_generation(gen_key, population):
        noise, starts = draws(gen_key)
        return numba_mppi.evaluate_candidates(config, population, noise, starts)

    return {"inputs": inputs, "evaluate": evaluate_generation}


def _library_prepare(inputs: MppiInputs, size: Size) -> dict[str, Any]:
    config = inputs.config
    keys = episode_keys(jax.random.key_data(jax.random.key(0)), config.episodes)
    population = jnp.zeros((config.population, 2), jnp.float32)
    compiled = (
        jax.jit(lambda k, p: evaluate_population(k, p, config)).lower(keys, population).compile()
    )

    def evaluate_generation(gen_key, population):
        return np.asarray(compiled(episode_keys(gen_key, config.episodes), population))

    return {"inputs": inputs, "evaluate": evaluate_generation, "compiled": compiled}


def _run(prepared: dict[str, Any]) -> TuningResult:
    inputs: MppiInputs = prepared["inputs"]
    return tune_with_cma(inputs.config, inputs.seed, prepared["evaluate"])


def numba_backend(name: str, **kwargs) -> Backend:
    # numba_lanes.evaluate_population runs prange over candidates: every core
    return loop_backend(
        name, Strategy.NUMBA, _numba_prepare, _run, engine="numba", parallel=True, **kwargs
    )


def numba_scalar_backend(name: str, **kwargs) -> Backend:
    # numba_mppi.evaluate_population runs prange over candidates: every core
    return loop_backend(
        name, Strategy.NUMBA, _numba_scalar_prepare, _run, engine="numba", parallel=True, **kwargs
    )


def library_backend(name: str, **kwargs) -> Backend:
    return loop_backend(
        name,
        Strategy.LIBRARY,
        _library_prepare,
        _run,
        executables=lambda prepared: {
            "evaluate_population": (prepared["compiled"], prepared["inputs"].config.generations)
        },
        **kwargs,
    )

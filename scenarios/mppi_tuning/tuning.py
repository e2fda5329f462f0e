"""CMA-ES tuning of (log lambda, log sigma): the result type and the evosax strategy.

Every backend returns a ``TuningResult``: the best candidate and its fitness in each
generation, and the final CMA-ES mean (the tuned parameters: the best single draw of a
noisy objective is a lucky one, the mean is what the search converged to).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .controller import Config, params_from_candidate

# Initial CMA-ES mean: lambda = 1, sigma = 1.
INITIAL_CANDIDATE = (0.0, 0.0)


class TuningResult(NamedTuple):
    best_candidate: jax.Array  # (G, 2): best z = (log lambda, log sigma) per generation
    best_fitness: jax.Array  # (G,): its fitness on that generation's episodes
    final_mean: jax.Array  # (2,): CMA-ES mean after the last generation (tuned z)


def make_strategy(config: Config):
    """evosax CMA-ES over 2 dims with the requested initial step size applied."""
    from evosax.algorithms import CMA_ES

    # The default float dtype (float32 unless 64-bit JAX is on), like evosax's own state.
    strategy = CMA_ES(population_size=config.population, solution=jnp.zeros(2))
    params = strategy.default_params.replace(std_init=jnp.asarray(config.sigma_init))
    return strategy, params


def initial_state(strategy, strategy_params, root: jax.Array):
    mean = jnp.asarray(INITIAL_CANDIDATE)
    return strategy.init(root, mean, strategy_params)


def describe(result: TuningResult) -> dict:
    """What a record stores about a tuning run: fitness per generation, tuned params."""
    best_fitness = np.asarray(result.best_fitness, dtype=np.float64)
    tuned = params_from_candidate(jnp.asarray(result.final_mean, jnp.float32))
    return {
        "best_fitness_per_generation": best_fitness.tolist(),
        "tuned_lambda": float(tuned.lambda_),
        "tuned_sigma": float(tuned.sigma),
        "final_mean_log": np.asarray(result.final_mean, dtype=np.float64).tolist(),
    }

"""The tuning objective: mean closed-loop cost of one candidate over E seeded episodes.

Keys (the same in every backend, so the same candidates get the same fitness):
    generation_key(root, g) = fold_in(root, g)
    ask key = fold_in(generation_key, 0); tell key = fold_in(generation_key, 2)
    episode keys = split(fold_in(generation_key, 1), E)      (common random numbers:
        every candidate of a generation sees the same starts and the same noise)
    per episode: (start key, run key) = split(episode key); step s uses fold_in(run, s)
Every candidate starts from a fresh controller state (a zero nominal sequence).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from .controller import (
    Config,
    Params,
    command,
    noise_shape,
    params_from_candidate,
)


def generation_key(root: jax.Array, generation) -> jax.Array:
    return jax.random.fold_in(root, generation)


def ask_key(gen_key: jax.Array) -> jax.Array:
    return jax.random.fold_in(gen_key, 0)


def tell_key(gen_key: jax.Array) -> jax.Array:
    return jax.random.fold_in(gen_key, 2)


def episode_keys(gen_key: jax.Array, episodes: int) -> jax.Array:
    return jax.random.split(jax.random.fold_in(gen_key, 1), episodes)


def episode_start_and_run_keys(key: jax.Array) -> tuple[jax.Array, jax.Array]:
    start, run = jax.random.split(key)
    return start, run


def episode_cost(key: jax.Array, params: Params, config: Config) -> jax.Array:
    """Mean running cost of one closed-loop episode of S control steps."""
    system = config.dynamics
    start_key, run_key = episode_start_and_run_keys(key)
    x0 = system.initial_state(start_key)
    nominal = jnp.zeros(config.horizon, x0.dtype)

    def step(carry, s):
        x, nominal, total = carry
        u, nominal = command(jax.random.fold_in(run_key, s), nominal, x, params, config)
        x = system.step(x, u, config.dt)
        return (x, nominal, total + system.cost(x, u)), None

    init = (x0, nominal, jnp.zeros((), x0.dtype))
    (_, _, total), _ = lax.scan(step, init, jnp.arange(config.control_steps))
    return total / config.control_steps


def evaluate(keys: jax.Array, z: jax.Array, config: Config) -> jax.Array:
    """Fitness of candidate ``z`` (log lambda, log sigma): mean over the episode keys.

    The evaluation is float32 whatever the optimizer's dtype (evosax state is float64
    when 64-bit JAX is on)."""
    params = params_from_candidate(jnp.asarray(z, jnp.float32))
    return jax.vmap(episode_cost, in_axes=(0, None, None))(keys, params, config).mean()


def evaluate_population(keys: jax.Array, population: jax.Array, config: Config) -> jax.Array:
    """Fitness of every candidate (P, 2) on the same episode keys (vmapped)."""
    return jax.vmap(evaluate, in_axes=(None, 0, None))(keys, population, config)


def episode_noise(keys: jax.Array, config: Config) -> tuple[jax.Array, jax.Array]:
    """The standard-normal noise (E, S, T, K) and starts (E, dim) the episodes use.

    Lets a non-JAX evaluator (Numba) see exactly the draws ``command`` makes.
    """

    def one(key):
        start_key, run_key = episode_start_and_run_keys(key)
        x0 = config.dynamics.initial_state(start_key)
        steps = jnp.arange(config.control_steps)
        noise = jax.vmap(
            lambda s: jax.random.normal(
                jax.random.fold_in(run_key, s), noise_shape(config), x0.dtype
            )
        )(steps)
        return noise, x0

    return jax.vmap(one)(keys)

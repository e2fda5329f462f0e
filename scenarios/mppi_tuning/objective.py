"""The tuning objective: mean closed-loop cost of one candidate over E seeded episodes.

Keys (the same in every backend, so the same candidates get the same fitness):
    generation_key(root, g) = fold_in(root, g)
    ask key = fold_in(generation_key, 0); tell key = fold_in(generation_key, 2)
    episode keys = split(fold_in(generation_key, 1), E)      (common random numbers:
        every candidate of a generation sees the same starts and the same noise)
    per episode: (start key, run key) = split(episode key); step s uses fold_in(run, s)
Every candidate starts from a fresh controller state (a zero nominal sequence).

`evaluate` (the reference, the loops over candidates) runs each candidate's episodes
whole. `evaluate_population` (the batched backends) runs the closed-loop steps outside the
candidates: each step draws its noise once for all of them (the same values: common
random numbers) and runs their commands in tiles (`candidates_per_tile`). On a CPU a
rollout step is several fused kernels, each writing its (candidates x K) arrays to
memory, and a whole population's arrays (64 x 256 lanes, one array per state component
and RK4 stage) left the core's cache. In tiles of 512 (pendulum) and 1,024 lanes
(cart-pole) the `sharded` backends run at 0.83x and 0.85x of the roofline's speed, from
0.68x and 0.61x (performance log, 2026-11-27).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from .controller import (
    Config,
    Params,
    command,
    command_with_noise,
    draw_noise,
    params_from_candidate,
)

# lanes (candidates x samples x episodes) per tile of `evaluate_population` on a CPU, so
# that the arrays of a rollout step stay in a core's cache (the `sharded` backends at
# `default`, tiles of 256-16,384 lanes tried: performance log, 2026-11-27)
TILE_LANES = {"pendulum": 512, "cartpole": 1024}


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


def episode_start(key: jax.Array, config: Config) -> tuple[jax.Array, jax.Array]:
    """An episode's start state and its run key, from its episode key."""
    start_key, run_key = episode_start_and_run_keys(key)
    return config.dynamics.initial_state(start_key), run_key


def step_key(run_key: jax.Array, step) -> jax.Array:
    """The key control step ``step`` of an episode draws its noise from."""
    return jax.random.fold_in(run_key, step)


def episode_cost(key: jax.Array, params: Params, config: Config) -> jax.Array:
    """Mean running cost of one closed-loop episode of S control steps."""
    system = config.dynamics
    x0, run_key = episode_start(key, config)
    nominal = jnp.zeros(config.horizon, x0.dtype)

    def step(carry, s):
        x, nominal, total = carry
        u, nominal = command(step_key(run_key, s), nominal, x, params, config)
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


def candidates_per_tile(config: Config, platform: str) -> int:
    """How many candidates `evaluate_population` evaluates at once: on a CPU as many as
    fill `TILE_LANES` lanes (at least one), elsewhere (a GPU) the whole population."""
    if platform != "cpu":
        return config.population
    lanes = config.samples * config.episodes
    return max(1, TILE_LANES[config.system] // lanes)


def evaluate_population(keys: jax.Array, population: jax.Array, config: Config) -> jax.Array:
    """Fitness of every candidate (P, 2) on the same episode keys: `evaluate`'s values,
    with the closed-loop steps outside the candidates. Each step draws its noise once for
    every candidate (common random numbers) and runs the candidates' commands vmapped in
    tiles (see the module doc)."""
    system = config.dynamics
    params = params_from_candidate(jnp.asarray(population, jnp.float32))  # batched Params
    starts, run_keys = jax.vmap(lambda key: episode_start(key, config))(keys)
    count, episodes = population.shape[0], keys.shape[0]
    dtype = starts.dtype
    commands = jax.vmap(command_with_noise, in_axes=(0, 0, 0, None, None))  # episodes
    tile = candidates_per_tile(config, jax.default_backend())

    def step(carry, s):
        x, nominal, total = carry
        noise = jax.vmap(lambda run_key: draw_noise(step_key(run_key, s), config, dtype))(run_keys)

        def one(candidate):
            candidate_params, candidate_x, candidate_nominal = candidate
            return commands(noise, candidate_nominal, candidate_x, candidate_params, config)

        if tile >= count:
            u, nominal = jax.vmap(one)((params, x, nominal))
        else:
            u, nominal = lax.map(one, (params, x, nominal), batch_size=tile)
        x = system.step(x, u, config.dt)
        return (x, nominal, total + system.cost(x, u)), None

    init = (
        jnp.broadcast_to(starts, (count, *starts.shape)),
        jnp.zeros((count, episodes, config.horizon), dtype),
        jnp.zeros((count, episodes), dtype),
    )
    (_, _, total), _ = lax.scan(step, init, jnp.arange(config.control_steps))
    return (total / config.control_steps).mean(axis=1)


def episode_noise(keys: jax.Array, config: Config) -> tuple[jax.Array, jax.Array]:
    """The standard-normal noise (E, S, T, K) and starts (E, dim) the episodes use.

    Lets a non-JAX evaluator (Numba) see exactly the draws ``command`` makes.
    """

    def one(key):
        x0, run_key = episode_start(key, config)
        steps = jnp.arange(config.control_steps)
        noise = jax.vmap(lambda s: draw_noise(step_key(run_key, s), config, x0.dtype))(steps)
        return noise, x0

    return jax.vmap(one)(keys)

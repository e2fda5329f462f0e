"""The autotuner of `scanbench.scenarios.seed_style.library`, rewritten the JAX way: the
same maths and the same random numbers, so the outputs agree on the same seed.

- pure parameter application: (lambda, sigma) are arguments of a jitted episode, not
  values written into a holder;
- ``pure_loop``: the candidates still in a Python loop, one jitted episode each;
- ``vmapped``: the population evaluated in one jitted ``vmap`` (one dispatch);
- ``scanned``: the whole ask-evaluate-tell generation inside one jitted ``lax.scan``.

Each takes the tuner's starting point (`Start`: the CMA-ES state and the keys a fresh
`Autotuner` holds) and returns the first generation's `GenerationResult`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

LOG_LAMBDA = (np.log(1e-2), np.log(1e2))
LOG_SIGMA = (np.log(0.05), np.log(5.0))


@dataclasses.dataclass(frozen=True)
class Problem:
    """Static settings: K sampled sequences of T steps, an episode of ``steps`` control
    steps, P candidates per generation."""

    samples: int = 16
    horizon: int = 8
    dt: float = 0.1
    steps: int = 3
    population: int = 4


def plant(state: Any, u: Any, dt: float) -> Any:
    """A point mass: position and velocity, accelerated by ``u``."""
    position, velocity = state[0], state[1]
    return jnp.stack([position + dt * velocity, velocity + dt * u])


def candidate_params(z: Any) -> tuple[Any, Any]:
    """(lambda, sigma) of a candidate (log lambda, log sigma), clipped to the bounds;
    NumPy in, NumPy out (the library's way), JAX in, JAX out."""
    xp = np if isinstance(z, np.ndarray) else jnp
    return (
        xp.exp(xp.clip(z[0], *LOG_LAMBDA)).astype(z.dtype),
        xp.exp(xp.clip(z[1], *LOG_SIGMA)).astype(z.dtype),
    )


class Start(NamedTuple):
    """What a fresh `Autotuner(problem, seed)` holds before its first step."""

    strategy_state: Any
    key: jax.Array
    controller_key: jax.Array

    @classmethod
    def of(cls, problem: Problem, seed: int) -> tuple[Start, Any, Any]:
        """(the start, the evosax strategy, its params), as the library builds them."""
        from scanbench.extras import require  # the `mppi` extra: one line without it

        CMA_ES = require("evosax.algorithms", "the seed_style example").CMA_ES

        key, controller_key, init_key = jax.random.split(jax.random.key(seed), 3)
        strategy = CMA_ES(population_size=problem.population, solution=jnp.zeros(2))
        params = strategy.default_params
        state = strategy.init(init_key, jnp.zeros(2), params)
        return cls(state, key, controller_key), strategy, params


class GenerationResult(NamedTuple):
    fitness: jax.Array  # (P,)
    best: jax.Array


def command_keys(controller_key: jax.Array, count: int) -> jax.Array:
    """The keys the library's controller draws its noise from, in order: each command
    splits its key and keeps the first half."""

    def split(key, _):
        key, sub = jax.random.split(key)
        return key, sub

    return jax.lax.scan(split, controller_key, None, length=count)[1]


def mppi_action(problem: Problem, key, state, lambda_, sigma):
    noise = sigma * jax.random.normal(key, (problem.samples, problem.horizon))

    def cost_of(controls):
        def step(carry, u):
            s, total = carry
            s = plant(s, u, problem.dt)
            return (s, total + s[0] ** 2 + 0.1 * u**2), None

        return jax.lax.scan(step, (state, jnp.zeros(())), controls)[0][1]

    weights = jax.nn.softmax(-jax.vmap(cost_of)(noise) / lambda_)
    return jnp.sum(weights * noise[:, 0])


def episode_cost(problem: Problem, candidate, keys):
    """One episode of ``problem.steps`` commands with the candidate's parameters."""
    lambda_, sigma = candidate_params(candidate)

    def step(carry, key):
        state, total = carry
        state = plant(state, mppi_action(problem, key, state, lambda_, sigma), problem.dt)
        return (state, total + state[0] ** 2), None

    start = (jnp.array([1.0, 0.0]), jnp.zeros(()))
    return jax.lax.scan(step, start, keys)[0][1]


def _keys(problem: Problem, start: Start):
    ask_key_pair = jax.random.split(start.key, 3)
    keys = command_keys(start.controller_key, problem.population * problem.steps)
    return ask_key_pair[1], ask_key_pair[2], keys.reshape(problem.population, problem.steps)


def generation(problem: Problem, strategy, params, start: Start):
    """One ask - evaluate (vmapped) - tell generation, pure: (result, next start)."""
    ask_key, tell_key, keys = _keys(problem, start)
    population, state = strategy.ask(ask_key, start.strategy_state, params)
    fitness = jax.vmap(functools.partial(episode_cost, problem))(population, keys)
    state, _ = strategy.tell(tell_key, population, fitness, state, params)
    used = problem.population * problem.steps  # the library's controller key, after
    controller_key = jax.lax.fori_loop(
        0, used, lambda _, key: jax.random.split(key)[0], start.controller_key
    )
    following = Start(state, jax.random.split(start.key, 3)[0], controller_key)
    return GenerationResult(fitness, jnp.min(fitness)), following


class Rewrites(NamedTuple):
    """The three rewrites of one tuner's first generation, as functions of no arguments
    (what `scanbench.compare` calls), each compiled once, outside its loop."""

    pure_loop: Any
    vmapped: Any
    scanned: Any


def build(problem: Problem, seed: int, generations: int = 1) -> Rewrites:
    """The rewrites of a fresh `Autotuner(problem, seed)`'s first generation(s)."""
    start, strategy, params = Start.of(problem, seed)
    episode = jax.jit(functools.partial(episode_cost, problem))

    def pure_loop() -> GenerationResult:
        ask_key, tell_key, keys = _keys(problem, start)
        population, state = strategy.ask(ask_key, start.strategy_state, params)
        fitness = jnp.stack([episode(population[i], keys[i]) for i in range(problem.population)])
        strategy.tell(tell_key, population, fitness, state, params)
        return GenerationResult(fitness, jnp.min(fitness))

    one = jax.jit(lambda s: generation(problem, strategy, params, s)[0])

    @jax.jit
    def scanned(first: Start) -> GenerationResult:
        def body(current: Start, _):
            result, following = generation(problem, strategy, params, current)
            return following, result

        _, results = jax.lax.scan(body, first, None, length=generations)
        return jax.tree.map(lambda x: x[-1], results)

    return Rewrites(pure_loop, lambda: one(start), lambda: scanned(start))

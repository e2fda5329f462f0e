"""A small autotuner written the way the MPPI library this project started from writes
it: the pattern to profile, not to copy.

- a mutable ``ConfigHolder`` that every tuned parameter is written into, which the
  controller reads (what makes ``vmap`` over candidates impossible);
- a controller whose ``command`` is not jitted and whose inner ``lax.scan`` gets a new
  closure on every call, so JAX traces and compiles the scan again each time;
- an ``Autotuner.optimize_step`` that asks evosax's CMA-ES for a population and evaluates
  it in a Python loop, one candidate at a time, with ``np.array(candidate)`` and
  ``float(cost)`` per candidate, then tells the fitness back; its state (the strategy's
  state, the controller's key, the iteration) advances on every call.

The maths is that of `scanbench.scenarios.seed_style.rewrites`: a point mass driven to
the origin by an MPPI controller (K sampled control sequences of T steps), one episode of
``steps`` control steps per candidate; (log lambda, log sigma) tuned.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .rewrites import Problem, candidate_params, plant


class GenerationResult(NamedTuple):
    fitness: jax.Array  # (P,) the population's episode costs
    best: jax.Array  # () the lowest of them


class ConfigHolder:
    """Mutable settings the controller reads: every candidate writes into it."""

    def __init__(self) -> None:
        self.lambda_ = 1.0
        self.sigma = 1.0


class Controller:
    """MPPI, as the library writes it: ``command`` is plain Python around JAX ops."""

    def __init__(self, holder: ConfigHolder, problem: Problem, key: jax.Array) -> None:
        self.holder, self.problem, self.key = holder, problem, key

    def command(self, state: jax.Array) -> jax.Array:
        self.key, sub = jax.random.split(self.key)
        shape = (self.problem.samples, self.problem.horizon)
        noise = self.holder.sigma * jax.random.normal(sub, shape)

        def cost_of(controls):  # a new closure on every call: the scan is traced again
            def step(carry, u):
                s, total = carry
                s = plant(s, u, self.problem.dt)
                return (s, total + s[0] ** 2 + 0.1 * u**2), None

            return jax.lax.scan(step, (state, jnp.zeros(())), controls)[0][1]

        costs = jax.vmap(cost_of)(noise)
        weights = jax.nn.softmax(-costs / self.holder.lambda_)
        return jnp.sum(weights * noise[:, 0])


@dataclasses.dataclass
class Autotuner:
    """CMA-ES over (log lambda, log sigma), evaluating candidates one at a time."""

    problem: Problem
    seed: int = 0

    def __post_init__(self) -> None:
        from scanbench.extras import require  # the `mppi` extra: one line without it

        CMA_ES = require("evosax.algorithms", "the seed_style example").CMA_ES

        self.holder = ConfigHolder()
        root = jax.random.key(self.seed)
        self.key, controller_key, init_key = jax.random.split(root, 3)
        self.controller = Controller(self.holder, self.problem, controller_key)
        self.strategy = CMA_ES(population_size=self.problem.population, solution=jnp.zeros(2))
        self.params = self.strategy.default_params
        self.state = self.strategy.init(init_key, jnp.zeros(2), self.params)
        self.iteration = 0

    def evaluate(self) -> jax.Array:
        """One episode with the holder's current settings."""
        state = jnp.array([1.0, 0.0])
        total = 0.0
        for _ in range(self.problem.steps):
            action = self.controller.command(state)
            state = plant(state, action, self.problem.dt)
            total = total + state[0] ** 2
        return total

    def optimize_step(self) -> GenerationResult:
        self.key, ask_key, tell_key = jax.random.split(self.key, 3)
        population, self.state = self.strategy.ask(ask_key, self.state, self.params)
        fitness = []
        for index in range(self.problem.population):
            candidate = np.array(population[index])  # one device-to-host copy per candidate
            lambda_, sigma = candidate_params(candidate)
            self.holder.lambda_, self.holder.sigma = float(lambda_), float(sigma)
            fitness.append(float(self.evaluate()))  # and one more for its cost
        fitness = jnp.asarray(fitness)
        self.state, _ = self.strategy.tell(tell_key, population, fitness, self.state, self.params)
        self.iteration += 1
        return GenerationResult(fitness, jnp.min(fitness))

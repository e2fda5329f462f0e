"""The evosax-driven backends: sequential (the real-world loop), vmapped, scanned.

``sequential`` reproduces the public library's tuning loop faithfully: evosax ``ask`` on
the device, then a Python loop over candidates, each converted with ``np.array(x)`` and
written into a mutable config holder, one jitted controller call per control step from
Python, ``float()`` of each episode's cost, then ``jnp.array(fitness)`` back for ``tell``.
``sequential-eager`` is the same loop with the controller called eagerly (the library
does not jit it): its internal ``lax.scan`` is retraced and recompiled on every call.
``vmapped`` keeps ask/tell in Python but evaluates the whole population in one jitted,
vmapped call per generation; ``scanned`` runs the whole G-generation
ask-evaluate-tell loop as one jitted ``lax.scan``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from scanbench import Backend, Compiled, Size, Strategy, compiled_backend, loop_backend

from .controller import (
    LOG_LOWER,
    LOG_UPPER,
    Config,
    Params,
    command,
)
from .objective import (
    ask_key,
    episode_keys,
    episode_start,
    evaluate_population,
    generation_key,
    step_key,
    tell_key,
)
from .problem import MppiInputs
from .tuning import TuningResult, initial_state, make_strategy


@dataclasses.dataclass
class ConfigHolder:
    """The mutable "config holder" of the public library: what blocks ``vmap``."""

    lambda_: float = 1.0
    sigma: float = 1.0

    def apply(self, candidate: np.ndarray) -> None:
        z = np.clip(candidate, LOG_LOWER, LOG_UPPER)
        self.lambda_ = float(math.exp(z[0]))
        self.sigma = float(math.exp(z[1]))


# ---------------------------------------------------------------- sequential loops


def _strategy_prepare(inputs: MppiInputs) -> dict[str, Any]:
    """The evosax strategy and root key, with ask and tell compiled."""
    config = inputs.config
    strategy, strategy_params = make_strategy(config)
    root = jax.random.key_data(jax.random.key(inputs.seed))
    state = initial_state(strategy, strategy_params, root)
    population, _ = strategy.ask(root, state, strategy_params)  # compile ask and tell
    jax.block_until_ready(
        strategy.tell(root, population, jnp.zeros(config.population), state, strategy_params)
    )
    return {"config": config, "root": root, "strategy": (strategy, strategy_params)}


def _sequential_prepare(inputs: MppiInputs, size: Size, jit_controller: bool) -> dict[str, Any]:
    config = inputs.config
    system = config.dynamics

    def controller(key, nominal, x, lambda_, sigma):
        return command(key, nominal, x, Params(lambda_, sigma), config)

    def plant(x, u):
        x = system.step(x, u, config.dt)
        return x, system.cost(x, u)

    x = jnp.zeros(system.state_dim, jnp.float32)
    nominal = jnp.zeros(config.horizon, jnp.float32)
    key = jax.random.key_data(jax.random.key(0))
    if jit_controller:
        controller = jax.jit(controller)
        jax.block_until_ready(controller(key, nominal, x, 1.0, 1.0))
    plant = jax.jit(plant)
    jax.block_until_ready(plant(x, jnp.float32(0.0)))
    return {**_strategy_prepare(inputs), "controller": controller, "plant": plant}


def _sequential_evaluate(prepared: dict[str, Any], holder: ConfigHolder, keys) -> float:
    """One candidate, as the public library evaluates it: Python loops, host floats."""
    config: Config = prepared["config"]
    controller, plant = prepared["controller"], prepared["plant"]
    total = 0.0
    for key in keys:
        x, run_key = episode_start(key, config)
        nominal = jnp.zeros(config.horizon, jnp.float32)  # a fresh controller per episode
        cost = 0.0
        for step in range(config.control_steps):
            key_of_step = step_key(run_key, step)
            u, nominal = controller(key_of_step, nominal, x, holder.lambda_, holder.sigma)
            x, step_cost = plant(x, u)
            cost = cost + step_cost
        total += float(cost) / config.control_steps
    return total / len(keys)


def _sequential_run(prepared: dict[str, Any]) -> TuningResult:
    config: Config = prepared["config"]
    strategy, strategy_params = prepared["strategy"]
    root = prepared["root"]
    state = initial_state(strategy, strategy_params, root)
    holder = ConfigHolder()
    best_candidate, best_fitness = [], []
    for generation in range(config.generations):
        gen_key = generation_key(root, generation)
        population, state = strategy.ask(ask_key(gen_key), state, strategy_params)
        keys = episode_keys(gen_key, config.episodes)
        fitness_values = []
        for x in population:
            holder.apply(np.array(x))
            fitness_values.append(_sequential_evaluate(prepared, holder, keys))
        fitness = jnp.array(fitness_values, dtype=jnp.float32)
        state, _ = strategy.tell(tell_key(gen_key), population, fitness, state, strategy_params)
        best = int(np.argmin(fitness_values))
        best_candidate.append(np.array(population[best]))
        best_fitness.append(fitness_values[best])
    return TuningResult(
        np.stack(best_candidate).astype(np.float32),
        np.asarray(best_fitness, np.float32),
        np.array(state.mean),
    )


def _estimate_eager(inputs: MppiInputs, size: Size) -> dict[str, float]:
    """Time a few eager control steps at this size and extrapolate to a whole run."""
    prepared = _sequential_prepare(inputs, size, jit_controller=False)
    config: Config = prepared["config"]
    steps = min(3, config.control_steps)
    probe = dataclasses.replace(config, control_steps=steps, episodes=1)
    keys = episode_keys(generation_key(prepared["root"], 0), 1)
    start = time.perf_counter()
    _sequential_evaluate({**prepared, "config": probe}, ConfigHolder(), keys)
    per_step = (time.perf_counter() - start) / steps
    total_steps = config.population * config.generations * config.episodes
    total_steps *= config.control_steps
    return {"estimated_s": per_step * total_steps, "measured_control_steps": float(steps)}


def sequential_backend(name: str, jit_controller: bool, **kwargs) -> Backend:
    return loop_backend(
        name,
        Strategy.SEQUENTIAL,
        lambda inputs, size: _sequential_prepare(inputs, size, jit_controller),
        _sequential_run,
        estimate=None if jit_controller else _estimate_eager,
        **kwargs,
    )


# ---------------------------------------------------------------- vmapped


def _vmapped_prepare(inputs: MppiInputs, size: Size) -> dict[str, Any]:
    prepared = _strategy_prepare(inputs)
    config: Config = prepared["config"]
    keys = episode_keys(prepared["root"], config.episodes)
    population = jnp.zeros((config.population, 2), jnp.float32)
    prepared["evaluate"] = (
        jax.jit(lambda k, p: evaluate_population(k, p, config)).lower(keys, population).compile()
    )
    return prepared


def _vmapped_run(prepared: dict[str, Any]) -> TuningResult:
    config: Config = prepared["config"]
    strategy, strategy_params = prepared["strategy"]
    evaluate = prepared["evaluate"]
    root = prepared["root"]
    state = initial_state(strategy, strategy_params, root)
    best_candidate, best_fitness = [], []
    for generation in range(config.generations):
        gen_key = generation_key(root, generation)
        population, state = strategy.ask(ask_key(gen_key), state, strategy_params)
        fitness = evaluate(episode_keys(gen_key, config.episodes), population.astype(jnp.float32))
        state, _ = strategy.tell(tell_key(gen_key), population, fitness, state, strategy_params)
        best = jnp.argmin(fitness)
        best_candidate.append(population[best])
        best_fitness.append(fitness[best])
    return TuningResult(jnp.stack(best_candidate), jnp.stack(best_fitness), state.mean)


# ---------------------------------------------------------------- scanned


def tune_scanned(root: jax.Array, config: Config, evaluate=None) -> TuningResult:
    """The whole ask-evaluate-tell loop as one ``lax.scan`` (evosax's recommended form).

    ``evaluate(keys, population) -> fitness`` defaults to `evaluate_population`; the
    sharded backend passes its device-split evaluation."""
    strategy, strategy_params = make_strategy(config)
    state = initial_state(strategy, strategy_params, root)
    if evaluate is None:
        evaluate = functools.partial(evaluate_population, config=config)

    def one_generation(state, generation):
        gen_key = generation_key(root, generation)
        population, state = strategy.ask(ask_key(gen_key), state, strategy_params)
        fitness = evaluate(episode_keys(gen_key, config.episodes), population)
        state, _ = strategy.tell(tell_key(gen_key), population, fitness, state, strategy_params)
        best = jnp.argmin(fitness)
        return state, (population[best], fitness[best])

    state, (best_candidate, best_fitness) = lax.scan(
        one_generation, state, jnp.arange(config.generations)
    )
    return TuningResult(best_candidate, best_fitness, state.mean)


def _scanned_compile(inputs: MppiInputs, size: Size) -> Compiled:
    root = jax.device_put(jax.random.key_data(jax.random.key(inputs.seed)))
    compiled = jax.jit(lambda r: tune_scanned(r, inputs.config)).lower(root).compile()
    return Compiled(compiled, (root,))


def scanned_backend(name: str, **kwargs) -> Backend:
    return compiled_backend(name, Strategy.SCANNED, _scanned_compile, **kwargs)


def vmapped_backend(name: str, **kwargs) -> Backend:
    return loop_backend(
        name,
        Strategy.VMAPPED,
        _vmapped_prepare,
        _vmapped_run,
        executables=lambda prepared: {
            "evaluate_population": (prepared["evaluate"], prepared["config"].generations)
        },
        **kwargs,
    )

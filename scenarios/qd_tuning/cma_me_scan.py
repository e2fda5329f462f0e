"""CMA-ME in one ``lax.scan``: the ``scanned`` backend (and ``sharded``'s loop).

Each generation, inside one jitted scan over generations:

- ask: evosax's CMA-ES, one state per emitter, vmapped over the emitter stack;
- evaluate: the whole population (emitters x batch) in one call (`evaluate_population`,
  or the sharded evaluation);
- insert: the grid archive as arrays (solution, objective, measures, occupied per cell).
  Each solution's cell is pyribs' ``index_of``; its status and value are computed against
  the archive before the batch, as pyribs' batch add does (2 new cell, value = objective;
  1 improved, value = the improvement; 0 not added, value = the shortfall); each cell
  keeps its batch's best (``jax.ops.segment_max``, ties to the first) by a scatter;
- tell: pyribs' two-stage improvement ranking (status, then value) as ranks, given to
  each emitter's CMA-ES as its fitness;
- restart: an emitter none of whose solutions entered the archive restarts from a random
  elite with its initial step size (pyribs' "no_improvement" rule).

Differences from pyribs, stated: evosax's CMA-ES recombines a fixed half of the batch
("mu" selection), pyribs' default recombines the solutions that entered the archive
("filter"); pyribs also restarts on CMA-ES's own stop tests (flat ranking, tiny step),
not done here. The random streams differ anyway: the check holds each backend to what it
reports, never to another backend's archive.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from scanbench import Backend, Compiled, Size, Strategy, compiled_backend

from .evaluation import INITIAL_SOLUTION, SOLUTION_DIM, evaluate_population
from .problem import (
    EPSILON,
    MEASURE_LOWER,
    MEASURE_UPPER,
    QD_SCORE_OFFSET,
    QdConfig,
    QdInputs,
    QdResult,
    evaluation_keys,
    optimizer_key,
    root_key,
)


def make_emitter(config: QdConfig):
    """evosax CMA-ES over the solution, with the emitters' initial step size."""
    from evosax.algorithms import CMA_ES

    strategy = CMA_ES(population_size=config.batch, solution=jnp.zeros(SOLUTION_DIM))
    params = strategy.default_params.replace(std_init=jnp.asarray(config.sigma0))
    return strategy, params


def cell_of(measures: jax.Array, config: QdConfig) -> jax.Array:
    """pyribs' ``GridArchive.index_of``: measures (N, 2) -> flat cell (N,)."""
    lower = jnp.asarray(MEASURE_LOWER, measures.dtype)
    upper = jnp.asarray(MEASURE_UPPER, measures.dtype)
    dims = jnp.asarray(config.cells)
    grid = jnp.floor((dims * (measures - lower) + EPSILON) / (upper - lower)).astype(jnp.int32)
    grid = jnp.clip(grid, 0, dims - 1)
    return grid[:, 0] * config.cells[1] + grid[:, 1]


def empty_archive(config: QdConfig) -> dict[str, jax.Array]:
    cells = config.cell_count
    return {
        "solution": jnp.zeros((cells, SOLUTION_DIM), jnp.float32),
        "value": jnp.zeros((cells, 3), jnp.float32),
        "occupied": jnp.zeros(cells, bool),
    }


def insert(archive: dict[str, jax.Array], solutions, values, config: QdConfig):
    """Add a batch (N, D), (N, 3) to the archive -> (archive, status (N,), value (N,))."""
    cells = config.cell_count
    objective = values[:, 0]
    cell = cell_of(values[:, 1:], config)
    held = archive["occupied"][cell]
    current = archive["value"][cell, 0]
    status = jnp.where(~held, 2, jnp.where(objective > current, 1, 0))
    value = jnp.where(held, objective - current, objective)
    best = jax.ops.segment_max(objective, cell, num_segments=cells)  # -inf where none
    index = jnp.arange(objective.shape[0])
    is_best = objective == best[cell]
    first = jax.ops.segment_min(jnp.where(is_best, index, objective.shape[0]), cell, cells)
    winner = jnp.minimum(first, objective.shape[0] - 1)
    arrived = first < objective.shape[0]
    better = arrived & (~archive["occupied"] | (best > archive["value"][:, 0]))
    archive = {
        "solution": jnp.where(better[:, None], solutions[winner], archive["solution"]),
        "value": jnp.where(better[:, None], values[winner], archive["value"]),
        "occupied": archive["occupied"] | better,
    }
    return archive, status, value


def two_stage_ranks(status: jax.Array, value: jax.Array) -> jax.Array:
    """Rank 0 for the best (status first, then value, both descending): a fitness that a
    minimising CMA-ES orders as pyribs' ``TwoStageImprovementRanker`` does."""
    order = jnp.lexsort((-value, -status))
    return jnp.argsort(order).astype(jnp.float32)


def qd_score(archive: dict[str, jax.Array]) -> jax.Array:
    terms = jnp.where(archive["occupied"], archive["value"][:, 0] - QD_SCORE_OFFSET, 0.0)
    return terms.sum()


def tune_cma_me(root: jax.Array, config: QdConfig, evaluate=None) -> QdResult:
    """G generations of CMA-ME as one ``lax.scan``. ``evaluate(keys, solutions (N, 3)) ->
    values (N, 3)`` defaults to `evaluate_population`; the sharded backend passes its
    device-split evaluation."""
    strategy, params = make_emitter(config)
    if evaluate is None:
        evaluate = functools.partial(evaluate_population, config=config.mppi)
    keys = evaluation_keys(root, config.mppi.episodes)
    init_key, stream = jax.random.split(optimizer_key(root))
    mean = jnp.asarray(INITIAL_SOLUTION)
    init_keys = jax.random.split(init_key, config.emitters)
    init = jax.vmap(strategy.init, in_axes=(0, None, None))
    states = init(init_keys, mean, params)
    ask = jax.vmap(strategy.ask, in_axes=(0, 0, None))
    tell = jax.vmap(strategy.tell, in_axes=(0, 0, 0, 0, None))
    shape = (config.emitters, config.batch)

    def restart(key, state, restarting, archive):
        """Emitters with ``restarting`` set start again from a random elite."""
        chance = archive["occupied"] / jnp.maximum(archive["occupied"].sum(), 1)
        pick_key, init_key = jax.random.split(key)
        cells = jax.random.choice(pick_key, chance.shape[0], (config.emitters,), p=chance)
        # one elite per emitter: the means are vmapped too (the first init shares one)
        fresh = jax.vmap(strategy.init, in_axes=(0, 0, None))(
            jax.random.split(init_key, config.emitters),
            archive["solution"][cells].astype(mean.dtype),
            params,
        )
        return jax.tree.map(
            lambda new, old: jnp.where(restarting.reshape((-1,) + (1,) * (old.ndim - 1)),
                                       new, old),
            fresh, state,
        )  # fmt: skip

    def one_generation(carry, generation):
        states, archive = carry
        key = jax.random.fold_in(stream, generation)
        ask_key, tell_key, restart_key = jax.random.split(key, 3)
        population, states = ask(jax.random.split(ask_key, config.emitters), states, params)
        solutions = population.reshape(-1, SOLUTION_DIM).astype(jnp.float32)
        values = evaluate(keys, solutions)
        archive, status, value = insert(archive, solutions, values, config)
        ranks = jax.vmap(two_stage_ranks)(status.reshape(shape), value.reshape(shape))
        tell_keys = jax.random.split(tell_key, config.emitters)
        states, _ = tell(tell_keys, population, ranks.astype(population.dtype), states, params)
        restarting = ~jnp.any(status.reshape(shape) > 0, axis=1)
        states = restart(restart_key, states, restarting, archive)
        best = jnp.argmax(values[:, 0])
        return (states, archive), (solutions[best], values[best], qd_score(archive))

    (_, archive), (best_solution, best_value, scores) = lax.scan(
        one_generation, (states, empty_archive(config)), jnp.arange(config.generations)
    )
    return QdResult(
        best_solution,
        best_value,
        archive["solution"],
        archive["value"],
        archive["occupied"],
        scores,
    )


def _compile(inputs: QdInputs, size: Size) -> Compiled:
    root = jax.device_put(root_key(inputs.seed))
    compiled = jax.jit(lambda r: tune_cma_me(r, inputs.config)).lower(root).compile()
    return Compiled(compiled, (root,))


def scanned_backend(name: str, **kwargs: Any) -> Backend:
    return compiled_backend(name, Strategy.SCANNED, _compile, **kwargs)

"""The ``sharded`` backend: `tune_scanned`'s loop with the population split over devices.

The whole G-generation ask-evaluate-tell loop stays one jitted ``lax.scan``; inside it,
the population (padded to a multiple of the device count with copies of its last
candidate) is evaluated with ``jax.shard_map`` over a 1-D mesh, each device evaluating its
slice on the same (replicated) episode keys. Only the first P fitness values reach
``argmin`` and ``tell``: the padding never influences the search. Ask and tell run
replicated on every device (2 numbers per candidate: cheaper than moving them).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from scanbench import Backend, Compiled, Size, Strategy, compiled_backend, placement

from .controller import Config
from .jax_loops import tune_scanned
from .objective import evaluate_population
from .problem import MppiInputs
from .tuning import TuningResult

AXIS = "population"


def split_over(evaluate: Any, mesh) -> Any:
    """``evaluate(keys, batch)`` with the batch's leading axis split over ``mesh``; the
    batch may be any size (padded with copies of its last row inside, the padding
    dropped from the result). The qd_tuning scenarios split their population the same way."""
    split = jax.shard_map(
        evaluate,
        mesh=mesh,
        in_specs=(P(), P(AXIS)),
        out_specs=P(AXIS),
        # the controller's scans start from unsharded zeros; with the varying-axis check on,
        # every such carry would need a pcast. Each device's work is independent anyway.
        check_vma=False,
    )

    def padded_evaluate(keys, batch):
        count = batch.shape[0]
        padding = placement.padded_size(count, mesh.size) - count
        if padding:
            filler = jnp.broadcast_to(batch[-1:], (padding, *batch.shape[1:]))
            batch = jnp.concatenate([batch, filler])
        return split(keys, batch)[:count]

    return padded_evaluate


def sharded_evaluate(config: Config, mesh) -> Any:
    """``(keys, population (P, 2)) -> fitness (P,)`` with the population split over
    ``mesh`` (`split_over`)."""
    return split_over(lambda keys, chunk: evaluate_population(keys, chunk, config), mesh)


def tune_sharded(root: jax.Array, config: Config, mesh) -> TuningResult:
    """`tune_scanned` with the population evaluation sharded over ``mesh``."""
    return tune_scanned(root, config, sharded_evaluate(config, mesh))


def _compile(inputs: MppiInputs, size: Size) -> Compiled:
    mesh = placement.mesh_1d(AXIS)
    root = jax.random.key_data(jax.random.key(inputs.seed))
    root = placement.put_global(root, NamedSharding(mesh, P()))
    compiled = jax.jit(lambda r: tune_sharded(r, inputs.config, mesh)).lower(root).compile()
    return Compiled(compiled, (root,))


def _to_reference(result: TuningResult) -> TuningResult:
    return TuningResult(*(placement.fetch(value) for value in result))


def sharded_backend(name: str, **kwargs) -> Backend:
    return compiled_backend(name, Strategy.SHARDED, _compile, to_reference=_to_reference, **kwargs)

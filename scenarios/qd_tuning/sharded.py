"""The ``sharded`` backend: `tune_cma_me`'s loop with the population's evaluation split
over devices, as ``mppi_tuning``'s ``sharded``.

The whole G-generation CMA-ME stays one jitted ``lax.scan``; inside it, the population
(emitters x batch, padded to a multiple of the device count with copies of its last
solution) is evaluated with ``jax.shard_map`` over a 1-D mesh, each device evaluating its
slice on the same (replicated) episode keys. Only the first N values reach the archive
and the ranking: the padding never influences the search. The emitters, the archive and
the ranking run replicated on every device (a few numbers per solution: cheaper than
moving them).
"""

from __future__ import annotations

from typing import Any

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from scanbench import Backend, Compiled, Size, Strategy, compiled_backend, placement
from scanbench.scenarios.mppi_tuning.controller import Config
from scanbench.scenarios.mppi_tuning.sharded import AXIS, split_over

from .cma_me_scan import tune_cma_me
from .evaluation import evaluate_population
from .problem import QdInputs, QdResult, root_key


def sharded_evaluate(config: Config, mesh) -> Any:
    """``(keys, solutions (N, 3)) -> values (N, 3)`` with the solutions split over
    ``mesh`` (`scanbench.scenarios.mppi_tuning.sharded.split_over`)."""
    return split_over(lambda keys, chunk: evaluate_population(keys, chunk, config), mesh)


def _compile(inputs: QdInputs, size: Size) -> Compiled:
    mesh = placement.mesh_1d(AXIS)
    config = inputs.config
    root = placement.put_global(root_key(inputs.seed), NamedSharding(mesh, P()))
    evaluate = sharded_evaluate(config.mppi, mesh)
    compiled = jax.jit(lambda r: tune_cma_me(r, config, evaluate)).lower(root).compile()
    return Compiled(compiled, (root,))


def _to_reference(result: QdResult) -> QdResult:
    return QdResult(*(placement.fetch(value) for value in result))


def sharded_backend(name: str, **kwargs: Any) -> Backend:
    return compiled_backend(name, Strategy.SHARDED, _compile, to_reference=_to_reference, **kwargs)

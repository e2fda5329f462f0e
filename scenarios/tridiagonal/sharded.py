"""The ``sharded`` backend: the blocked solver with the systems split over devices.

The (n, batch) time-major diagonals are placed with ``NamedSharding(mesh, P(None,
"systems"))`` on a 1-D mesh over the cell's devices; ``jax.shard_map`` runs
`blocked.blocked_kernel` on each device's share of the systems (no communication: the
systems are independent). On a CPU each device is one core (the runner gives a sharded
backend one XLA:CPU device per core unless ``--devices`` says otherwise), so this is the
JAX-native way to use every core. A batch that does not divide by the device count is
padded with identity systems (b = 1, a = c = d = 0, solution 0) and the padding is cut
from the result.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from scanbench import Backend, Compiled, Size, Strategy, compiled_backend, placement

from .blocked import DEFAULT_BLOCK, SMALL_LOOPS, blocked_kernel
from .problem import Diagonals
from .scanned import to_time_major

AXIS = "systems"
SPEC = P(None, AXIS)  # time-major (n, batch): split the batch


def pad_systems(diagonals: Diagonals, batch: int) -> Diagonals:
    """Time-major diagonals with identity systems appended up to ``batch`` columns."""
    n, current = diagonals.a.shape
    if batch == current:
        return diagonals
    extra = np.zeros((n, batch - current), diagonals.a.dtype)
    return Diagonals(
        *(np.concatenate([v, extra + (1.0 if name == "b" else 0.0)], axis=1)
          for name, v in zip(Diagonals._fields, diagonals, strict=True))
    )  # fmt: skip


def _compile(inputs: Diagonals, size: Size, block: int) -> Compiled:
    mesh = placement.mesh_1d(AXIS)
    time_major = to_time_major(inputs)
    batch = time_major.a.shape[1]
    padded = pad_systems(time_major, placement.padded_size(batch, mesh.size))
    systems = NamedSharding(mesh, SPEC)
    args = Diagonals(*(placement.put_global(v, systems) for v in padded))
    # check_vma off: the kernel's scans start from unsharded zeros (systems are independent)
    solve = jax.shard_map(
        functools.partial(blocked_kernel, block=block),
        mesh=mesh,
        in_specs=(SPEC,),
        out_specs=SPEC,
        check_vma=False,
    )
    return Compiled(jax.jit(lambda d: solve(d)[:, :batch]).lower(args).compile(), (args,))


def _to_reference(x: jax.Array) -> np.ndarray:
    return placement.fetch(x).T  # (n, batch) -> (batch, n)


def sharded_backend(name: str, block: int = DEFAULT_BLOCK, **kwargs) -> Backend:
    return compiled_backend(
        name,
        Strategy.SHARDED,
        functools.partial(_compile, block=block),
        to_reference=_to_reference,
        xla_flags=SMALL_LOOPS,
        **kwargs,
    )

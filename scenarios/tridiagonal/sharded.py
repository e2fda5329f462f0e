"""The ``sharded`` backend: the blocked solver with the systems split over devices.

The (n, batch) time-major diagonals are placed with ``NamedSharding(mesh, P(None,
"systems"))`` on a 1-D mesh over the cell's devices; ``jax.shard_map`` runs
`blocked.solve_into` on each device's share of the systems (no communication: the
systems are independent), into a donated output of the same sharding. On a CPU each
device is one core (the runner gives a sharded backend one XLA:CPU device per core unless
``--devices`` says otherwise), so this is the JAX-native way to use every core. A batch
that does not divide by the device count is
padded with identity systems (b = 1, a = c = d = 0, solution 0); the output keeps the
padded columns (a slice would copy the whole output, the copy donation avoids), returned
with the count of real ones (`Solved`), and the padding is cut on the host, untimed, by
``to_reference``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from scanbench import Backend, Compiled, Size, Strategy, compiled_backend, placement

from .blocked import DEFAULT_BLOCK, SMALL_LOOPS, solve_into
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
    out = placement.put_global(np.zeros_like(padded.d), systems)
    # check_vma off: the kernel's loops start from unsharded zeros (systems are independent)
    solve = jax.shard_map(
        functools.partial(solve_into, block=block),
        mesh=mesh,
        in_specs=(SPEC, SPEC),
        out_specs=SPEC,
        check_vma=False,
    )
    whole = jax.jit(lambda d, x: Solved(solve(d, x), np.int32(batch)), donate_argnums=1)
    return Compiled(whole.lower(args, out).compile(), (args, out))


class Solved(NamedTuple):
    """The (n, padded) solution, in place in the donated output, and its real columns."""

    x: jax.Array
    batch: jax.Array


def _to_reference(solved: Solved) -> np.ndarray:
    return placement.fetch(solved.x)[:, : int(solved.batch)].T  # (n, padded) -> (batch, n)


def sharded_backend(name: str, block: int = DEFAULT_BLOCK, **kwargs) -> Backend:
    backend = compiled_backend(
        name,
        Strategy.SHARDED,
        functools.partial(_compile, block=block),
        to_reference=_to_reference,
        xla_flags=SMALL_LOOPS,
        donate=(1,),
        **kwargs,
    )
    return backend

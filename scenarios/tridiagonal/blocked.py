"""The cache-blocked time-major Thomas solver: the systems taken ``block`` at a time.

The time-major scan (`scanned.time_major_kernel`) sweeps all systems at once: each of its
2n steps reads and writes batch-wide rows, and the forward sweep's primes (2 x n x batch
values, 160 MB at `default`) go to memory and come back. Here a ``lax.fori_loop`` walks
over blocks of ``block`` systems of the same time-major (n, batch) arrays: the forward scan
reads each row of the block straight from the inputs (``dynamic_slice``, ``block``
contiguous values), keeps that block's primes (2 x n x block values: 1.6 MB at n = 100,
block = 1000) in cache for the backward scan, and writes the block's solution in place
(``dynamic_update_slice``). Same layout in and out as the time-major scan; no transpose.
The last block is shifted back to end at ``batch`` (its start is clamped, as
``dynamic_slice`` does) and solves a few systems twice, with identical results.

XLA:CPU runs each scan iteration as a handful of small kernels by default (thunks); its
small-while-loop pass can instead compile a whole loop into one native kernel when the
loop's footprint is under ``xla_cpu_small_while_loop_byte_threshold`` (1 kB by default).
`SMALL_LOOPS` raises it for the worker of these backends (`scanbench.api.Backend.xla_flags`).
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from .problem import Diagonals
from .scanned import _backward_step, _forward_step

# XLA:CPU compiles every while loop of these solvers into one native kernel (the flag is
# read by the CPU compiler only; other platforms ignore it).
SMALL_LOOPS = ("--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1000000000",)
DEFAULT_BLOCK = 1000  # from the sweep in the README (block=250..20000 at `default`)


def blocked_kernel(diagonals: Diagonals, block: int = DEFAULT_BLOCK):
    """Time-major (n, batch) diagonals in, x as (n, batch) out, ``block`` systems at a
    time (fewer when the batch is smaller)."""
    n, batch = diagonals.a.shape
    block = min(block, batch)
    blocks = -(-batch // block)

    def solve(index, out):
        start = jnp.minimum(index * block, batch - block)

        def forward(carry, i):
            rows = [lax.dynamic_slice(v, (i, start), (1, block))[0] for v in diagonals]
            return _forward_step(carry, rows)

        zero = jnp.zeros((block,), diagonals.a.dtype)
        _, primes = lax.scan(forward, (zero, zero), jnp.arange(n))
        _, x = lax.scan(_backward_step, zero, primes, reverse=True)
        return lax.dynamic_update_slice_in_dim(out, x, start, axis=1)

    return lax.fori_loop(0, blocks, solve, jnp.zeros_like(diagonals.d))

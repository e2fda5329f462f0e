"""The cache-blocked time-major Thomas solver: the systems taken ``block`` at a time,
written in place into a donated output.

The time-major scan (`scanned.time_major_kernel`) sweeps all systems at once: each of its
2n steps reads and writes batch-wide rows, and the forward sweep's primes (2 x n x batch
values, 160 MB at `default`) go to memory and come back. Here a ``lax.fori_loop`` walks
over blocks of ``block`` systems of the same time-major (n, batch) arrays. For each block,
a forward loop over the rows reads each row of the block straight from the inputs
(``dynamic_slice``, ``block`` contiguous values), keeps ``c'`` in an (n, block) scratch that
stays in cache and writes ``d'`` into the output's rows; a backward loop then overwrites
those rows with the solution, ``x_i = d'_i - c'_i x_{i+1}`` (``dynamic_update_slice`` on
the output carried by the loops: XLA updates it in place). This is the Numba time-major
solver's structure (`numba_solvers`), in plain JAX. Same layout in and out as the
time-major scan; no transpose. The last block is shifted back to end at ``batch`` (its
start is clamped, as ``dynamic_slice`` does) and solves a few systems twice, with
identical results.

The output is an argument, donated (`solve_into`): a new 80 MB output per call is a
fresh mapping whose pages fault on first touch, which with its zero fill took about as
long as the solve (`default`, one core: 1.8x the Numba solver allocating per call, 1.0x
writing into a donated buffer; see the performance log, #50). `blocked_kernel` is the
same solver allocating its output, for callers that keep no buffer.

XLA:CPU runs each loop iteration as a handful of small kernels by default (thunks); its
small-while-loop pass can instead compile a whole loop into one native kernel when the
loop's footprint is under ``xla_cpu_small_while_loop_byte_threshold`` (1 kB by default).
`SMALL_LOOPS` raises it for the worker of these backends (`scanbench.api.Backend.xla_flags`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

from scanbench import Compiled, Size

from .problem import Diagonals
from .scanned import _backward_step, _forward_step, to_time_major

# XLA:CPU compiles every while loop of these solvers into one native kernel (the flag is
# read by the CPU compiler only; other platforms ignore it).
SMALL_LOOPS = ("--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1000000000",)
DEFAULT_BLOCK = 1000  # from the sweep in the README (block=250..20000 at `default`)


def solve_into(diagonals: Diagonals, out: jax.Array, block: int = DEFAULT_BLOCK) -> jax.Array:
    """Time-major (n, batch) diagonals in, x written into ``out`` (n, batch) and returned,
    ``block`` systems at a time (fewer when the batch is smaller). Jit it with ``out``
    donated to write in place."""
    n, batch = diagonals.a.shape
    block = min(block, batch)
    blocks = -(-batch // block)

    def solve(index, out):
        start = jnp.minimum(index * block, batch - block)

        def forward(i, carry):
            last_cp, last_dp, primes, out = carry
            rows = Diagonals(*(lax.dynamic_slice(v, (i, start), (1, block)) for v in diagonals))
            (cp, dp), _ = _forward_step((last_cp, last_dp), rows)
            primes = lax.dynamic_update_slice(primes, cp, (i, 0))
            return cp, dp, primes, lax.dynamic_update_slice(out, dp, (i, start))

        def backward(k, carry):
            last_x, out = carry
            i = n - 2 - k
            cp = lax.dynamic_slice(primes, (i, 0), (1, block))
            dp = lax.dynamic_slice(out, (i, start), (1, block))
            x, _ = _backward_step(last_x, (cp, dp))
            return x, lax.dynamic_update_slice(out, x, (i, start))

        zero = jnp.zeros((1, block), diagonals.a.dtype)
        scratch = jnp.zeros((n, block), diagonals.a.dtype)
        _, last_x, primes, out = lax.fori_loop(0, n, forward, (zero, zero, scratch, out))
        _, out = lax.fori_loop(0, n - 1, backward, (last_x, out))
        return out

    return lax.fori_loop(0, blocks, solve, out)


def blocked_kernel(diagonals: Diagonals, block: int = DEFAULT_BLOCK) -> jax.Array:
    """`solve_into` a new output (allocated and zero-filled by every call)."""
    return solve_into(diagonals, jnp.zeros_like(diagonals.d), block)


def donated_compile(inputs: Diagonals, size: Size, block: int = DEFAULT_BLOCK) -> Compiled:
    """Time-major inputs and an output buffer on the device, `solve_into` compiled with the
    buffer (argument 1) donated: ``compiled_backend(..., donate=(1,))``."""
    args = jax.device_put(to_time_major(inputs))
    out = jnp.zeros_like(args.d)
    solve = jax.jit(functools.partial(solve_into, block=block), donate_argnums=1)
    return Compiled(solve.lower(args, out).compile(), (args, out))

"""Batched tridiagonal solves (TDMA): the workload of JAX issue #2491.

``SCENARIO`` lists every backend in display order; the dict keys are the CLI names.
"""

from __future__ import annotations

import functools

from scanbench import (
    Param,
    Scenario,
    Strategy,
    chained,
    compiled_backend,
    host_backend,
    jax_backend,
    parametric,
)
from scanbench.extras import needing

from . import (
    blocked,
    library,
    numba_solvers,
    scanned,
    sequential,
    sharded,
    vmapped,
)
from .problem import AXES, SIZES, Diagonals, make_inputs, work
from .reference import check, gtsv_solve, reference

__all__ = ["SCENARIO", "Diagonals"]

# without Numba (`pip install 'scanbench[numba]'`) these are stored as skipped, saying so
NUMBA_BACKENDS = "the Numba backends"

_BACKENDS = [
    host_backend(
        "sequential-numpy",
        Strategy.SEQUENTIAL,
        "numpy",
        sequential.numpy_sweep,
        description="the issue's NumPy sweep: Python loop over n, vectorised over the batch",
    ),
    sequential.jax_columns_backend(
        "sequential-jax",
        synchronize=False,
        description="one jitted step per column from Python (2n dispatches), queued",
    ),
    sequential.jax_columns_backend(
        "sequential-jax-sync",
        synchronize=True,
        description="as sequential-jax, waiting for each step before the next",
    ),
    jax_backend(
        "vmapped",
        Strategy.VMAPPED,
        vmapped.vmapped_kernel,
        description="jax.vmap over systems of a per-system lax.scan",
    ),
    jax_backend(
        "scanned-issue",
        Strategy.SCANNED,
        scanned.issue_kernel,
        description="lax.scan exactly as in JAX issue #2491 (transposes inside jit)",
    ),
    parametric(
        lambda unroll: jax_backend(
            "scanned-time-major",
            Strategy.SCANNED,
            scanned.time_major_unrolled(unroll),
            description="lax.scan over (n, batch) inputs; transposes outside, reverse=True",
            layout=scanned.to_time_major,
            to_reference=scanned.from_time_major,
        ),
        unroll=Param(1, description="lax.scan(unroll=...): iterations per loop body"),
    ),
    parametric(
        lambda block: compiled_backend(
            "scanned-blocked",
            Strategy.SCANNED,
            functools.partial(blocked.donated_compile, block=block),
            description="time-major sweeps over blocks of systems (fori_loop), each block's "
            "primes kept in cache, written in place into a donated output; XLA:CPU loops "
            "compiled as native kernels",
            to_reference=scanned.from_time_major,
            xla_flags=blocked.SMALL_LOOPS,
            donate=(1,),
        ),
        block=Param(blocked.DEFAULT_BLOCK, description="systems per block"),
    ),
    parametric(
        lambda block: sharded.sharded_backend(
            "sharded",
            block=block,
            description="scanned-blocked with the systems split over all devices (one per "
            "CPU core by default; shard_map)",
        ),
        block=Param(blocked.DEFAULT_BLOCK, description="systems per block on each device"),
    ),
    needing(
        host_backend(
            "numba-serial",
            Strategy.NUMBA,
            "numba",
            numba_solvers.serial,
            description="@njit loop over systems, one Thomas sweep each",
            warm_inputs=numba_solvers.tiny_batch_major,
        ),
        NUMBA_BACKENDS,
        "numba",
    ),
    needing(
        host_backend(
            "numba-parallel",
            Strategy.NUMBA,
            "numba",
            numba_solvers.parallel,
            description="@njit(parallel=True), prange over blocks of systems",
            warm_inputs=numba_solvers.tiny_batch_major,
            parallel=True,
        ),
        NUMBA_BACKENDS,
        "numba",
    ),
    needing(
        host_backend(
            "numba-time-major",
            Strategy.NUMBA,
            "numba",
            numba_solvers.time_major,
            description="time-major blocks of 256 systems swept together (inner loop vectorises), "
            "into an output array allocated once in prepare",
            layout=lambda inputs: numba_solvers.with_output(scanned.to_time_major(inputs)),
            to_reference=scanned.from_time_major,
            warm_inputs=numba_solvers.tiny_time_major,
            parallel=True,  # prange over blocks of systems
        ),
        NUMBA_BACKENDS,
        "numba",
    ),
    jax_backend(
        "library-lax",
        Strategy.LIBRARY,
        library.lax_tridiagonal_kernel,
        description="jax.lax.linalg.tridiagonal_solve",
    ),
    host_backend(
        "library-scipy-gtsv",
        Strategy.LIBRARY,
        "scipy",
        gtsv_solve,
        description="SciPy LAPACK ?gtsv called once per system from Python",
    ),
]

# How each backend runs the systems' dependent sweeps (`scanbench.api.Backend.chains`):
# one system after another (a Numba loop over systems; LAPACK ?gtsv once per system, from
# SciPy or from jaxlib's CPU lowering of tridiagonal_solve, a custom call that loops over
# the batch), or several systems per step (vectorised across the batch: NumPy, vmap,
# scan over time-major rows, the time-major Numba blocks). Tested against the measured
# chain floor (tests/engine/test_chains.py).
SERIAL_CHAINS = ("numba-serial", "numba-parallel", "library-lax", "library-scipy-gtsv")
_BACKENDS = [
    chained(backend, "serial" if backend.name in SERIAL_CHAINS else "interleaved")
    for backend in _BACKENDS
]

SCENARIO = Scenario(
    name="tridiagonal",
    description="many independent diagonally dominant tridiagonal systems (TDMA)",
    sizes=SIZES,
    make_inputs=make_inputs,
    reference=reference,
    check=check,
    work=work,
    backends={backend.name: backend for backend in _BACKENDS},
    throughput_unit="systems",
    baseline="sequential-jax",  # the JAX Python loop: one jitted call per column
    axes=AXES,
)

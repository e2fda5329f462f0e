"""Workloads built to be one bottleneck each, for the diagnosis's known-answer tests.

Each backend is built so that its bottleneck takes most of its time on any machine this
suite runs on; `tests/scenarios/test_known_answers.py` measures them for real (`scanbench run`) and
checks that the diagnosis names the built bottleneck first. Every backend checks its own
output (`Backend.check`): they compute different things.

Each bottleneck is a scenario of its own (one backend: no other backend of its table does
"the same work"): the overheads (dispatch, waits, transfers, recompilation, many small
executions), a compute-bound kernel (Numba: the flops it does are declared in its
``work()``, as host code's must be), and ``IN_L2``, ``IN_L3`` and ``IN_DRAM``, one copy
each whose working set fits in that level (sized from the caches the OS reports; the
DRAM one is NumPy's, see `_numpy_copies`).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numba
import numpy as np

from scanbench import Backend, Scenario, Size, Strategy, host_backend, loop_backend
from scanbench.probes.caches import cache_sizes

TINY = jax.jit(lambda x: x + 1.0)  # 4 floats: XLA:CPU runs it inline, a dispatch and no work
SMALL_WORK = jax.jit(lambda x: jnp.cumsum(jnp.sin(x)))  # asynchronous (>1000 flops), small


def _finite(prepared, output) -> float:
    """A backend's own check: its output is finite numbers (what it computes differs)."""
    values = np.concatenate([np.ravel(np.asarray(leaf)) for leaf in jax.tree.leaves(output)])
    return 0.0 if np.all(np.isfinite(values)) else float("inf")


def _dispatch_loop(x):
    for _ in range(400):
        x = TINY(x)
    return x


def _waits(x):
    for _ in range(60):  # fewer than the 100 dispatches "many small executions" looks at
        x = jax.block_until_ready(SMALL_WORK(x))
    return x


def _transfers(host):
    total = jnp.zeros(())
    for row in host:  # one host-to-device copy of a 1 MiB row per step
        total = total + jnp.sum(jax.device_put(row))
    return total


def _recompiles(x):
    return jax.jit(lambda y: y * 2.0)(x)  # a new function object: traced and compiled again


def _small_executions(x):
    for _ in range(200):
        x = SMALL_WORK(x)  # queued: the host keeps ahead, each execution is small
    return x


HORNER = 16  # fused multiply-adds per element and round (a degree-16 polynomial)
COMPUTE_ROUNDS = 6000
COMPUTE_ELEMENTS = 2**12


@numba.njit(cache=True, fastmath=True)
def _compute(x, rounds):
    """A degree-16 polynomial of each element, by Horner's rule, ``rounds`` times: 16 fused
    multiply-adds and a multiply per element and round on an array in L1, the elements
    independent (the loop vectorises): arithmetic and nothing else."""
    out = x.copy()
    for _ in range(rounds):
        for i in range(out.size):
            v = out[i]
            p = np.float32(0.01)
            for _ in range(HORNER):
                p = p * v + np.float32(0.05)
            out[i] = p * np.float32(0.5)
    return out


@numba.njit(cache=True)
def _copies(src, dst, repeats):
    for _ in range(repeats):
        for i in range(src.size):
            dst[i] = src[i]
    return dst


def _numpy_copies(src, dst, repeats):
    """The DRAM copies: NumPy's own (``np.copyto``), the copy the DRAM bound is measured
    with (`scanbench.probes.caches`). Beyond the caches glibc's memcpy streams its stores
    past them; a loop's stores read each line of the destination first, a third more
    traffic: on an Intel Xeon VM with a 300 MiB L3 the Numba loop copied 1.2 GB at 12-13
    GB/s against np.copyto's 20-21 GB/s, 1.95x the bound in a run (2026-12-01), past
    "near a limit" (1.5x). In the caches the loop is what the bound measures."""
    for _ in range(repeats):
        np.copyto(dst, src)
    return dst


def _prepare_jax(inputs, size):
    return jax.device_put(inputs["small"])


def _backend(name, strategy, run, prepare=_prepare_jax):
    return dataclasses.replace(loop_backend(name, strategy, prepare, run), check=_finite)


SIZES = {"smoke": Size("smoke", {}), "default": Size("default", {})}


def _inputs(size, seed, dtype):
    rng = np.random.default_rng(seed)
    return {
        "small": rng.standard_normal(2**10).astype(np.float32),
        "medium": rng.standard_normal(2**12).astype(np.float32),
        "between": rng.standard_normal(2**11).astype(np.float32),
        "tiny": np.zeros(4, np.float32),
        "rows": rng.standard_normal((32, 2**18)).astype(np.float32),
        "compute": rng.uniform(-1.0, 1.0, COMPUTE_ELEMENTS).astype(np.float32),
    }


def _alone(backend: Backend, work_bytes: float, flops: float | None = None) -> Scenario:
    """A scenario of one backend (its own check), with the flops it declares, if any."""
    units = {"calls": 1, "bytes": work_bytes} | ({"flops": flops} if flops else {})
    return Scenario(
        name=backend.name,
        description=backend.description or backend.name,
        sizes=SIZES,
        make_inputs=_inputs,
        reference=lambda inputs: None,
        check=lambda output, expected, dtype: 0.0,
        work=lambda size, dtype: units,
        backends={backend.name: backend},
        throughput_unit="calls",
        dtypes=("float32",),
    )


DISPATCH = _alone(
    _backend(
        "dispatch-loop",
        Strategy.SEQUENTIAL,
        _dispatch_loop,
        prepare=lambda inputs, size: jax.device_put(inputs["tiny"]),
    ),
    400 * 2 * 16,
)
SYNC = _alone(_backend("waits-per-step", Strategy.SEQUENTIAL, _waits), 60 * 2 * 2**12)
TRANSFER = _alone(
    _backend(
        "host-rows-per-step",
        Strategy.SEQUENTIAL,
        _transfers,
        prepare=lambda inputs, size: inputs["rows"],
    ),
    32 * 2**20,
)
RECOMPILE = _alone(_backend("jit-inside-the-call", Strategy.SEQUENTIAL, _recompiles), 2 * 2**12)
SMALL = _alone(
    _backend(
        "small-executions",
        Strategy.SEQUENTIAL,
        _small_executions,
        # 2^11 floats: 39-53 us of device work each (2026-11-26), under the 100 us of
        # "small" and more than twice a dispatch; at 2^10 the dispatches took as large a
        # share, at 2^12 an execution took 114 us in a slow phase of the VM
        prepare=lambda inputs, size: jax.device_put(inputs["between"]),
    ),
    200 * 2**12,
)
COMPUTE = _alone(
    host_backend(
        "compute-kernel",
        Strategy.NUMBA,
        "numba",
        lambda x: _compute(x, COMPUTE_ROUNDS),
        layout=lambda inputs: inputs["compute"],
        warm_inputs=lambda x: x[:2],
        check=_finite,
    ),
    2.0 * COMPUTE_ELEMENTS * 4,
    flops=(2 * HORNER + 1) * COMPUTE_ELEMENTS * COMPUTE_ROUNDS,  # declared: host code
)


def _copy_scenario(name: str, nbytes: int, repeats: int, numpy: bool = False) -> Scenario:
    """One copy whose source and destination (``nbytes`` each) fit the level: a Numba loop,
    or with ``numpy`` NumPy's own copy (`_numpy_copies`)."""
    count = nbytes // 8
    copies = _numpy_copies if numpy else _copies

    def prepare(inputs, size):
        src = np.random.default_rng(0).standard_normal(count)
        dst = np.empty_like(src)
        copies(src[:2], dst[:2], 1)  # compile, outside the timed calls
        return src, dst

    copy = Backend(
        name="copy",
        strategy=Strategy.LIBRARY if numpy else Strategy.NUMBA,
        engine="numpy" if numpy else "numba",
        prepare=prepare,
        run=lambda prepared: copies(prepared[0], prepared[1], repeats),
        check=_finite,
    )
    return Scenario(
        name=name,
        description=f"a copy of {nbytes} bytes, {repeats} times per call",
        sizes=SIZES,
        make_inputs=lambda size, seed, dtype: {},
        reference=lambda inputs: None,
        check=lambda output, expected, dtype: 0.0,
        work=lambda size, dtype: {"calls": 1, "bytes": 2.0 * nbytes * repeats},
        backends={"copy": copy},
        throughput_unit="calls",
        dtypes=("float64",),
    )


_SIZES = dict(cache_sizes()) or {"L2": 2**20, "L3": 32 * 2**20}
_LAST = max(_SIZES.values())
IN_L2 = _copy_scenario("copy-in-l2", _SIZES.get("L2", 2**20) // 8, 2000)
IN_L3 = _copy_scenario("copy-in-l3", _LAST // 8, 40)
IN_DRAM = _copy_scenario("copy-in-dram", max(4 * _LAST, 256 * 2**20), 2, numpy=True)
# one copy per call, for cold samples: a working set in a core's own L2 comes from DRAM
# when the caches were evicted; one far larger than the cache comes from DRAM anyway. Not
# the last-level cache: on an Intel Xeon VM whose OS reports a 300 MiB L3, one thread
# copied 8-150 MiB arrays at 18-24 GB/s, as fast as 600 MiB ones (21 GB/s), so its cold
# and warm copies of 37.5 MiB were 1.06x apart (2026-12-02); L2's ran at 45 GB/s
ONCE_IN_L2 = _copy_scenario("once-in-l2", _SIZES.get("L2", 2**20) // 8, 1)
ONCE_IN_DRAM = _copy_scenario("once-in-dram", max(4 * _LAST, 256 * 2**20), 1)

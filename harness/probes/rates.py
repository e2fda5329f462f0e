"""Rates of this machine that turn counts into times, measured once per run.

The diagnosis names a cell compute-bound, memory-bound or a host loop only when a count
times one of these rates accounts for the time (`scanbench.diagnosis`); the rates are
measured in the run, on the same machine, like the unit costs of
`scanbench.probes.overheads` and the copy bandwidths of `scanbench.probes.caches`:

- **arithmetic** (``flops_per_s``): floating-point operations per second of a kernel that
  does nothing else, per dtype, on one thread and on every usable core. The kernel keeps
  an array of 1024 elements in L1 and applies ``v = v * a + b`` eight times per element
  and round (Numba, ``fastmath``: one fused multiply-add, two flops, per step; the
  elements are independent, so the loop vectorises and the chains overlap). It reaches
  the FMA units' peak (two 256-bit FMAs per cycle and core on the AMD EPYC VM this
  project is developed on). No workload's mix of operations goes faster, so a count at
  this rate is a floor of its arithmetic time. On a GPU the same chain runs as a jitted
  elementwise function over 2^24 elements on the device (`device_flops_per_s`).
- **a page fault** (``fault_s``): what touching freshly mapped memory costs per minor
  fault of one base page (4 KiB on x86-64): a fresh anonymous 64 MiB mapping with
  transparent huge pages turned off for it (``MADV_NOHUGEPAGE``) written, against
  writing memory already touched, divided by the faults counted (``getrusage``). The
  kernel's zeroing of the page is in it. A fault of a huge page (2 MiB, which NumPy asks
  for on large arrays) costs more per fault (on this project's VM 181 us against 2.7 us)
  but less per byte: the same probe with huge pages asked for (``MADV_HUGEPAGE``) gives
  ``fault_huge_s``, where the kernel grants them. A cell's fault count
  (`scanbench.probes.usage`) does not say which kind it took; the bytes its calls
  allocate per fault do (`scanbench.evidence.fault_price`: a base page's price unless
  a fault mapped a megabyte or more), and priced at a base page's cost its faults' time
  is a floor (``fault_kind``), never an overestimate. (Before, the probe wrote a NumPy array and
  averaged over its mix of huge and base pages, 12.6 us a fault: a JAX cell's base-page
  faults were priced 4-5x too high, and "memory-bound" claimed 200-370% of a median.)
- **a dependent step** (``chain_step_s``): seconds of one step of ``x = c / (b - a x)``
  (a multiply, a subtract, a divide), each waiting for the last, per dtype, on one core
  (Numba, no ``fastmath``): the *latency* of a chain, where the arithmetic rate above is
  the *throughput* of many independent ones. A Thomas sweep's forward step is this chain
  (plus a multiply), so a solver that runs its systems one after another cannot take
  less than steps x this per core (`scanbench.evidence.chain_floor`); one that interleaves
  systems overlaps their chains and is bound by the throughput instead. On this
  project's VM 5-6 ns, against 0.02 ns per flop at the FMA rate.
- **a NumPy call** (``numpy_call_s``): one ``np.add`` of two 1-element arrays into a
  third, from Python: the fixed cost of a call into a library from a Python loop (its
  argument parsing and dispatch, no work).

Each is the best (arithmetic: calls of many rounds less a call of one, so that starting
a parallel region is not in it; faults: the best fresh write less the best warm one) or the
median (calls) of repeated measurements.
"""

from __future__ import annotations

import functools
import mmap
import resource
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..extras import available, missing_line
from .caches import usable_threads

DTYPES = ("float32", "float64")
ELEMENTS = 1024  # per thread: 4-8 KiB, in L1
STEPS = 8  # fused multiply-adds per element and round
TIMED_S = 0.02  # each measurement runs about this long
FAULT_BYTES = 64 * 2**20
NUMPY_CALLS = 2000


@functools.cache
def _kernels() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The FMA chain for one thread and over threads (``prange``), compiled on first use
    or loaded from Numba's cache (`scanbench.probes.rate_kernels`: Numba is imported
    here, not with the module: start-up cost)."""
    from . import rate_kernels

    return rate_kernels.chain, rate_kernels.over_threads


CHAIN_STEPS = 2**20  # about 5 ms a call: far above the call's fixed cost


def chain_step_s(dtype: str, repeats: int = 5) -> float:
    """Seconds of one dependent step of ``x = c / (b - a x)`` in ``dtype`` on one core:
    the best of ``repeats`` calls of `CHAIN_STEPS` steps less the best call of one step
    (its fixed cost), over the steps."""
    from . import rate_kernels

    kind = np.dtype(dtype).type
    a, b, c = kind(0.25), kind(2.0), kind(0.5)  # converges to 0.2583: no denormals

    def best(steps: int) -> float:
        fastest = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            rate_kernels.dependent(a, b, c, steps)
            fastest = min(fastest, time.perf_counter() - start)
        return fastest

    fixed = best(1)  # compiled (or loaded from Numba's cache) by this first call
    seconds = best(CHAIN_STEPS)
    return max(seconds - fixed, seconds / 2) / CHAIN_STEPS


def _best_rate(run: Callable[[int], None], flops_per_round: float, repeats: int = 5) -> float:
    """Flops per second of ``run(rounds)``, with its fixed cost per call (a parallel
    region's start: milliseconds when threads must be woken on a busy machine) taken out:
    the fixed cost is the best of calls of one round; rounds are doubled until a call
    takes `TIMED_S` more than that; the rate is R rounds over the best of ``repeats``
    calls of R less the fixed cost (never less than half the call: a noisy fixed cost
    must not make the rate)."""

    def best(count: int, times: int = repeats) -> float:
        fastest = float("inf")
        for _ in range(times):
            start = time.perf_counter()
            run(count)
            fastest = min(fastest, time.perf_counter() - start)
        return fastest

    fixed = best(1, 3)  # compiled and warm: a call of one round is mostly its fixed cost
    rounds = 2
    while best(rounds, 1) < fixed + TIMED_S and rounds < 2**30:
        rounds *= 2
    seconds = best(rounds)
    return flops_per_round * rounds / max(seconds - fixed, seconds / 2)


def host_flops_per_s(dtype: str, threads: int | None = None) -> dict[str, float]:
    """The FMA chain's flops per second in ``dtype`` on one thread and on ``threads``
    threads (default: every usable core)."""
    one, every = _kernels()
    threads = threads or usable_threads()
    kind = np.dtype(dtype).type
    a, b = kind(0.999), kind(0.001)  # converges to 1: no overflow, no denormals
    x = np.ones(ELEMENTS, dtype)
    xs = np.ones((threads, ELEMENTS), dtype)
    per_round = 2.0 * STEPS * ELEMENTS
    return {
        "one": _best_rate(lambda rounds: one(x, a, b, rounds), per_round),
        "all": _best_rate(lambda rounds: every(xs, a, b, rounds), per_round * threads),
        "threads": float(threads),
    }


def device_flops_per_s(dtype: str, elements: int = 2**24, rounds: int = 16) -> float:
    """The same chain as a jitted elementwise function on the default device (GPU runs),
    waited for; flops per second of the best of five calls."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def chain(x):
        def step(_, v):
            for _ in range(STEPS):
                v = v * 0.999 + 0.001
            return v

        return lax.fori_loop(0, rounds, step, x)

    x = jnp.ones(elements, dtype)
    run = jax.jit(chain)
    jax.block_until_ready(run(x))
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        jax.block_until_ready(run(x))
        best = min(best, time.perf_counter() - start)
    return 2.0 * STEPS * rounds * elements / best


HUGE_BYTES = 2**20  # a fault that maps this much or more on average took huge pages


def _fresh_pages(nbytes: int, huge: bool = False) -> mmap.mmap:
    """A fresh anonymous mapping of base pages (huge pages refused where the kernel has
    them), or asking for huge pages (``huge``): every page faults on its first write."""
    mapping = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    advice = "MADV_HUGEPAGE" if huge else "MADV_NOHUGEPAGE"
    if hasattr(mmap, advice):  # Linux; elsewhere there are no huge pages here
        mapping.madvise(getattr(mmap, advice))
    return mapping


def _write(mapping: mmap.mmap, value: float) -> tuple[float, int]:
    """Seconds and minor faults of writing ``value`` over the whole mapping."""
    array = np.frombuffer(mapping, dtype=np.float64)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    array.fill(value)
    seconds = time.perf_counter() - start
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    del array  # the mapping cannot close while an array holds its buffer
    return seconds, faults


def _fault_price(nbytes: int, repeats: int, huge: bool) -> tuple[float, float]:
    """(seconds per minor fault over writing memory already touched, bytes one fault
    mapped), of base pages or of pages asked to be huge."""
    kept = _fresh_pages(nbytes, huge)
    _write(kept, 0.0)
    warms, colds, faults = [], [], []
    for _ in range(repeats):
        warms.append(_write(kept, 1.0)[0])
        fresh = _fresh_pages(nbytes, huge)
        seconds, faulted = _write(fresh, 1.0)
        colds.append(seconds)
        faults.append(faulted)
        fresh.close()
    kept.close()
    # The best of each, not the median of the differences: another process taking the
    # core during a warm write makes that difference negative, and a busy machine (a
    # parallel test run) does so in most repeats.
    count = max(float(np.median(faults)), 1.0)
    extra = max(min(colds) - min(warms), 0.0)
    return extra / count, nbytes / count


def fault_cost(nbytes: int = FAULT_BYTES, repeats: int = 7) -> dict[str, Any]:
    """Seconds per minor fault of a base page and the bytes one fault mapped on average,
    and the same of a huge page where the kernel grants them on request (``fault_huge_s``,
    ``fault_huge_bytes``; absent where a fault still maps less than `HUGE_BYTES`: no
    transparent huge pages). See the module doc."""
    base, base_bytes = _fault_price(nbytes, repeats, huge=False)
    found: dict[str, Any] = {"fault_s": base, "fault_bytes": base_bytes, "fault_kind": "base page"}
    huge, huge_bytes = _fault_price(nbytes, repeats, huge=True)
    if huge_bytes >= HUGE_BYTES:
        found.update(fault_huge_s=huge, fault_huge_bytes=huge_bytes)
    return found


def numpy_call_cost(calls: int = NUMPY_CALLS, repeats: int = 7) -> dict[str, float]:
    """Seconds of one ``np.add`` of 1-element arrays from a Python loop (median)."""
    a, b, out = np.ones(1), np.ones(1), np.empty(1)
    add = np.add
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            add(a, b, out=out)
        samples.append((time.perf_counter() - start) / calls)
    return {"numpy_call_s": float(np.median(samples))}


def measure_rates(platform: str = "cpu", arithmetic: bool = True) -> dict[str, Any]:
    """Every rate of the module doc (a few seconds, most of it importing Numba, which
    compiles its kernels on the first run and caches them); without ``arithmetic`` (the
    notebook API, where seconds count) only the fault and call costs."""
    rates: dict[str, Any] = {"platform": platform, **fault_cost(), **numpy_call_cost()}
    if not arithmetic:
        return rates
    if platform != "gpu" and not available("numba"):
        # the host's arithmetic rates need the Numba kernels: without them the operation
        # counts are compared with no rate, and the environment says why
        return {**rates, "flops_missing": missing_line("numba", "host arithmetic rates")}
    if platform == "gpu":
        flops = {dtype: {"device": device_flops_per_s(dtype)} for dtype in DTYPES}
    else:
        flops = {dtype: host_flops_per_s(dtype) for dtype in DTYPES}
    kernel = f"{STEPS} dependent fused multiply-adds per element and round"
    rates = {**rates, "flops_per_s": flops, "flops_kernel": kernel}
    if platform == "gpu":  # a host core's chain says nothing of a GPU thread's
        return rates
    return {
        **rates,
        "chain_step_s": {dtype: chain_step_s(dtype) for dtype in DTYPES},
        "chain_kernel": CHAIN_KERNEL,
    }


CHAIN_KERNEL = (
    "x = c / (b - a x), each step waiting for the last (a multiply, a subtract, a divide)"
)

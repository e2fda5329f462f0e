"""The arithmetic kernel of `scanbench.probes.rates`, compiled by Numba and kept in its
on-disk cache (``cache=True``): module-level functions, because Numba cannot find a
closure in its cache again (defined inside a function, the parallel kernel was compiled
anew by every run, about 1 s per dtype, and its cache index grew by an entry each time).
Imported only when the rates are measured: Numba's import is start-up cost."""

from __future__ import annotations

import numba


@numba.njit(fastmath=True, cache=True)
def chain(x, a, b, rounds):
    """``v = v * a + b`` eight times per element and round (one FMA each)."""
    for _ in range(rounds):
        for i in range(x.size):
            v = x[i]
            v = v * a + b
            v = v * a + b
            v = v * a + b
            v = v * a + b
            v = v * a + b
            v = v * a + b
            v = v * a + b
            v = v * a + b
            x[i] = v


@numba.njit(fastmath=True, parallel=True, cache=True)
def over_threads(xs, a, b, rounds):
    """`chain` on each row of ``xs``, one row per thread (``prange``)."""
    for t in numba.prange(xs.shape[0]):
        chain(xs[t], a, b, rounds)


@numba.njit(cache=True, error_model="numpy")
def dependent(a, b, c, steps):
    """``x = c / (b - a x)`` ``steps`` times, each step waiting for the last (no
    ``fastmath``: the division stays a division and nothing is reordered): the latency
    of a Thomas forward sweep's step, which no core can overlap within one chain."""
    x = a - a  # zero, of the arguments' dtype
    for _ in range(steps):
        x = c / (b - a * x)
    return x

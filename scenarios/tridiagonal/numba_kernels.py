"""The Numba kernels behind `numba_solvers` (compiled with ``cache=True``).

Apart from their entry points so that only a worker that runs a Numba backend imports
Numba: a JAX cell's worker loads the scenario without it.
"""

from __future__ import annotations

import numba
import numpy as np

# Systems swept together by the time-major solver: the scratch (n x BLOCK) of primes
# stays in cache for n up to a few thousand, and the inner loop is long enough to
# vectorise.
BLOCK = 256


@numba.njit(cache=True)
def _solve_system(a, b, c, d, out, cp):
    n = a.shape[0]
    cp[0] = c[0] / b[0]
    out[0] = d[0] / b[0]
    for i in range(1, n):
        denom = 1.0 / (b[i] - a[i] * cp[i - 1])
        cp[i] = c[i] * denom
        out[i] = (d[i] - a[i] * out[i - 1]) * denom
    for i in range(n - 2, -1, -1):
        out[i] -= cp[i] * out[i + 1]


@numba.njit(cache=True)
def serial(a, b, c, d):
    out = np.empty_like(d)
    cp = np.empty(d.shape[1], d.dtype)
    for s in range(d.shape[0]):
        _solve_system(a[s], b[s], c[s], d[s], out[s], cp)
    return out


@numba.njit(cache=True, parallel=True)
def parallel(a, b, c, d):
    batch, n = d.shape
    out = np.empty_like(d)
    blocks = (batch + BLOCK - 1) // BLOCK
    for k in numba.prange(blocks):
        cp = np.empty(n, d.dtype)
        for s in range(k * BLOCK, min(batch, (k + 1) * BLOCK)):
            _solve_system(a[s], b[s], c[s], d[s], out[s], cp)
    return out


@numba.njit(cache=True, parallel=True)
def time_major(a, b, c, d, out):
    n, batch = d.shape
    blocks = (batch + BLOCK - 1) // BLOCK
    for k in numba.prange(blocks):
        lo = k * BLOCK
        hi = min(batch, lo + BLOCK)
        cp = np.empty((n, hi - lo), d.dtype)
        for s in range(lo, hi):
            cp[0, s - lo] = c[0, s] / b[0, s]
            out[0, s] = d[0, s] / b[0, s]
        for i in range(1, n):
            for s in range(lo, hi):
                denom = 1.0 / (b[i, s] - a[i, s] * cp[i - 1, s - lo])
                cp[i, s - lo] = c[i, s] * denom
                out[i, s] = (d[i, s] - a[i, s] * out[i - 1, s]) * denom
        for i in range(n - 2, -1, -1):
            for s in range(lo, hi):
                out[i, s] -= cp[i, s - lo] * out[i + 1, s]
    return out

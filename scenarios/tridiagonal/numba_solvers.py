"""Numba Thomas solvers: serial loop over systems, ``prange`` over systems, and a
time-major blocked sweep whose inner loop runs across systems (so it vectorises).

All are compiled with ``cache=True``; ``prepare`` compiles them on tiny inputs of the
same dtype and layout, so the timed calls never include compilation.

The time-major solver writes into an output array allocated once, in the untimed
prepare (`SolveInto`), as a solver called again and again on new right-hand sides would
be written (LAPACK's ``?gtsv`` overwrites its ``B``; FFTW plans own their buffers). A
fresh 80 MB output per call is a fresh ``mmap``: its first touch page-faults every page
from two threads at once, which took about as long as the solve itself (see the
performance log, #37).
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from .problem import Diagonals

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
def _serial(a, b, c, d):
    out = np.empty_like(d)
    cp = np.empty(d.shape[1], d.dtype)
    for s in range(d.shape[0]):
        _solve_system(a[s], b[s], c[s], d[s], out[s], cp)
    return out


@numba.njit(cache=True, parallel=True)
def _parallel(a, b, c, d):
    batch, n = d.shape
    out = np.empty_like(d)
    blocks = (batch + BLOCK - 1) // BLOCK
    for k in numba.prange(blocks):
        cp = np.empty(n, d.dtype)
        for s in range(k * BLOCK, min(batch, (k + 1) * BLOCK)):
            _solve_system(a[s], b[s], c[s], d[s], out[s], cp)
    return out


class SolveInto(NamedTuple):
    """Time-major (n, batch) diagonals and the (n, batch) array the solution goes to."""

    diagonals: Diagonals
    out: np.ndarray


def with_output(diagonals: Diagonals) -> SolveInto:
    """The diagonals with an output array allocated and touched once (untimed)."""
    return SolveInto(diagonals, np.full_like(diagonals.d, 0.0))


@numba.njit(cache=True, parallel=True)
def _time_major(a, b, c, d, out):
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


def serial(diagonals: Diagonals) -> np.ndarray:
    return _serial(*diagonals)


def parallel(diagonals: Diagonals) -> np.ndarray:
    return _parallel(*diagonals)


def time_major(solve: SolveInto) -> np.ndarray:
    """Time-major (n, batch) in, time-major out: ``solve.out``, overwritten."""
    return _time_major(*solve.diagonals, solve.out)


def tiny_batch_major(diagonals: Diagonals) -> Diagonals:
    """Two systems of three unknowns, same dtype and layout: enough to compile."""
    return Diagonals(*(np.ascontiguousarray(v[:2, :3]) for v in diagonals))


def tiny_time_major(solve: SolveInto) -> SolveInto:
    return with_output(Diagonals(*(np.ascontiguousarray(v[:3, :2]) for v in solve.diagonals)))

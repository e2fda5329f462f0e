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

import functools
from types import ModuleType
from typing import NamedTuple

import numpy as np

from .problem import Diagonals


@functools.cache
def _kernels() -> ModuleType:
    """The compiled kernels' module, imported on first use: importing Numba costs a
    worker about half a second, which a JAX cell's worker need not pay."""
    from . import numba_kernels

    return numba_kernels


class SolveInto(NamedTuple):
    """Time-major (n, batch) diagonals and the (n, batch) array the solution goes to."""

    diagonals: Diagonals
    out: np.ndarray


def with_output(diagonals: Diagonals) -> SolveInto:
    """The diagonals with an output array allocated and touched once (untimed)."""
    return SolveInto(diagonals, np.full_like(diagonals.d, 0.0))


def serial(diagonals: Diagonals) -> np.ndarray:
    return _kernels().serial(*diagonals)


def parallel(diagonals: Diagonals) -> np.ndarray:
    return _kernels().parallel(*diagonals)


def time_major(solve: SolveInto) -> np.ndarray:
    """Time-major (n, batch) in, time-major out: ``solve.out``, overwritten."""
    return _kernels().time_major(*solve.diagonals, solve.out)


def tiny_batch_major(diagonals: Diagonals) -> Diagonals:
    """Two systems of three unknowns, same dtype and layout: enough to compile."""
    return Diagonals(*(np.ascontiguousarray(v[:2, :3]) for v in diagonals))


def tiny_time_major(solve: SolveInto) -> SolveInto:
    return with_output(Diagonals(*(np.ascontiguousarray(v[:3, :2]) for v in solve.diagonals)))

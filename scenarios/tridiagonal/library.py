"""Library solvers: ``jax.lax.linalg.tridiagonal_solve`` and SciPy's LAPACK ``?gtsv``."""

from __future__ import annotations

from jax import lax

from .problem import Diagonals


def lax_tridiagonal_kernel(diagonals: Diagonals):
    """``lax.linalg.tridiagonal_solve`` over the batch (a[:, 0] and c[:, -1] are zero)."""
    a, b, c, d = diagonals
    return lax.linalg.tridiagonal_solve(a, b, c, d[..., None])[..., 0]

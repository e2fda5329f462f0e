"""Reference solution (LAPACK ``dgtsv``, partial pivoting, float64) and the check.

The reference is a different algorithm from every Thomas-sweep backend, and it is itself
verified by its residual ``|A x - d|`` before any backend is compared with it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scanbench import HarnessError, MismatchError

from .problem import Diagonals

# Max |x - x_ref| / max(1, max |x_ref|) allowed, per dtype of the backend's inputs.
TOLERANCE = {"float64": 1e-10, "float32": 1e-4}
# Max |A x_ref - d| / max(1, max |d|) the float64 reference itself must reach.
REFERENCE_RESIDUAL = 1e-12


def gtsv_solve(diagonals: Diagonals) -> np.ndarray:
    """Solve every system with LAPACK ``?gtsv`` (one call per system), in the input dtype."""
    # imported here: SciPy's linalg costs a worker about half a second, and the cells of
    # a run share one reference (computed by the first cell that needs it)
    from scipy.linalg import lapack

    a, b, c, d = diagonals
    gtsv = lapack.get_lapack_funcs("gtsv", (b,))
    out = np.empty_like(d)
    for s in range(d.shape[0]):
        *_, x, info = gtsv(a[s, 1:], b[s], c[s, :-1], d[s])
        if info != 0:
            raise HarnessError(f"LAPACK gtsv failed on system {s} (info={info})")
        out[s] = x
    return out


def residual(diagonals: Diagonals, x: np.ndarray) -> float:
    """Max |A x - d| / max(1, max |d|) over all systems (vectorised over the batch)."""
    a, b, c, d = (np.asarray(v, dtype=np.float64) for v in diagonals)
    x = np.asarray(x, dtype=np.float64)
    ax = b * x
    ax[:, 1:] += a[:, 1:] * x[:, :-1]
    ax[:, :-1] += c[:, :-1] * x[:, 1:]
    return float(np.max(np.abs(ax - d)) / max(1.0, float(np.max(np.abs(d)))))


def reference(diagonals: Diagonals) -> np.ndarray:
    """The float64 solution of the given systems, verified by its residual."""
    as_f64 = Diagonals(*(np.asarray(v, dtype=np.float64) for v in diagonals))
    x = gtsv_solve(as_f64)
    res = residual(as_f64, x)
    if not res <= REFERENCE_RESIDUAL:
        raise HarnessError(
            f"the tridiagonal reference itself is wrong: residual {res:.3e} > "
            f"{REFERENCE_RESIDUAL:.0e}"
        )
    return x


def check(output: Any, expected: np.ndarray, dtype: str) -> float:
    """Compare a backend's solution with the reference; return the scaled max error.

    Raises:
        MismatchError: wrong shape, wrong dtype, non-finite values, or an error above
            ``TOLERANCE[dtype]``.
    """
    tolerance = TOLERANCE[dtype]
    x = np.asarray(output)
    if x.shape != expected.shape:
        raise MismatchError(
            f"solution has shape {x.shape}, expected {expected.shape}", float("inf"), tolerance
        )
    if x.dtype != np.dtype(dtype):
        raise MismatchError(
            f"solution has dtype {x.dtype}, expected {dtype} (a silent promotion or cast)",
            float("inf"),
            tolerance,
        )
    error = np.abs(x.astype(np.float64) - expected)
    if not np.all(np.isfinite(error)):
        raise MismatchError("solution has non-finite values", float("inf"), tolerance)
    scaled = float(error.max()) / max(1.0, float(np.abs(expected).max()))
    if scaled > tolerance:
        worst = np.unravel_index(int(error.argmax()), error.shape)
        raise MismatchError(
            f"solution differs from the LAPACK reference, worst at system {worst[0]}, "
            f"row {worst[1]}",
            scaled,
            tolerance,
        )
    return scaled

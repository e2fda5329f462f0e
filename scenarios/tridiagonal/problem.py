"""The batched tridiagonal problem: sizes, seeded inputs, units of work.

Each system ``s`` is ``a[s, i] x[i-1] + b[s, i] x[i] + c[s, i] x[i+1] = d[s, i]`` for
``i = 0..n-1`` with ``a[s, 0] = 0`` and ``c[s, n-1] = 0`` (the layout of the public JAX
issue #2491, "Jax scans are slower than expected": diagonals of shape (batch, n)).
The systems are strictly diagonally dominant (``|b| >= |a| + |c| + 1``), so the Thomas
algorithm is stable without pivoting.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from scanbench import DTYPES, Axis, Size, UnknownNameError


class Diagonals(NamedTuple):
    """Sub-, main and super-diagonal and right-hand side, each of shape (batch, n)."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    d: np.ndarray


SIZES = {
    "smoke": Size("smoke", {"batch": 1_000, "n": 100}, "tests and CI, seconds"),
    "default": Size("default", {"batch": 100_000, "n": 100}, "the size from JAX issue #2491"),
    "long": Size("long", {"batch": 100, "n": 10_000}, "few long systems: long scans"),
    "wide": Size("wide", {"batch": 10_000, "n": 1_000}, "in between"),
}

# the directions the work grows in (`scanbench run --grow batch=1000..100000`)
AXES = {
    "batch": Axis("batch", "systems", "independent systems solved per call"),
    "n": Axis("n", "rows", "unknowns per system: the length of every sweep", minimum=2),
}


def make_inputs(size: Size, seed: int, dtype: str) -> Diagonals:
    """Seeded, strictly diagonally dominant systems as NumPy arrays on the host."""
    if dtype not in DTYPES:
        raise UnknownNameError("dtype", dtype, DTYPES, "scenario 'tridiagonal'")
    rng = np.random.default_rng(seed)
    shape = (size["batch"], size["n"])
    a = rng.uniform(-1.0, 1.0, shape)
    c = rng.uniform(-1.0, 1.0, shape)
    a[:, 0] = 0.0
    c[:, -1] = 0.0
    b = (np.abs(a) + np.abs(c) + rng.uniform(1.0, 2.0, shape)) * rng.choice([-1.0, 1.0], shape)
    d = rng.uniform(-1.0, 1.0, shape)
    return Diagonals(*(np.ascontiguousarray(x, dtype=dtype) for x in (a, b, c, d)))


def work(size: Size, dtype: str) -> dict[str, float]:
    """Per call: systems solved, unknowns, the minimum bytes any solver must move and the
    floating-point operations of the Thomas algorithm.

    The minimum traffic is reading a, b, c, d once and writing x once. The operations:
    per unknown, the forward sweep's ``1 / (b - a c')`` (a multiply, a subtract, a
    divide), ``c' = c / (...)`` (a multiply) and ``d' = (d - a d') / (...)`` (a multiply,
    a subtract, a multiply), and the backward sweep's ``x = d' - c' x`` (a multiply, a
    subtract): 9, one of them a division (XLA's cost analysis of the scanned backends
    counts the same 9 per unknown).

    The dependent chains: each system's forward sweep is a chain of n steps, each
    waiting for the last (``c'_i`` needs ``c'_{i-1}`` through a divide), so
    ``chain_steps`` is one step per unknown over ``chains`` = systems (the backward
    sweep's chain of multiply-subtracts is not counted: the floor stays a floor).
    """
    elements = size["batch"] * size["n"]
    itemsize = np.dtype(dtype).itemsize
    return {
        "systems": float(size["batch"]),
        "unknowns": float(elements),
        "bytes": float(5 * elements * itemsize),
        "flops": float(9 * elements),
        "chains": float(size["batch"]),
        "chain_steps": float(elements),
    }

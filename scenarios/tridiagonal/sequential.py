"""Python-loop sweeps: the NumPy code of JAX issue #2491 and a per-column JAX dispatch.

``numpy_sweep`` loops over the n axis in Python, vectorised over the batch, exactly as
the issue's ``tdma_naive`` (on copies, since that code overwrites b and d).
The JAX version runs the same sweep with one jitted step per column called from Python:
2n + 1 dispatches per solve, so it is bound by dispatch overhead. ``synchronize=True``
waits for every step before the next (the "wait after each call" pattern, e.g. a
``float()`` or logging inside the loop); ``False`` queues them and waits once.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from harness.api import Backend, Size, Strategy
from scenarios.tridiagonal.problem import Diagonals


def numpy_sweep(diagonals: Diagonals) -> np.ndarray:
    """The issue's ``tdma_naive``, on copies of b and d."""
    a, b, c, d = diagonals
    b = b.copy()
    d = d.copy()
    n = a.shape[-1]
    for i in range(1, n):
        w = a[..., i] / b[..., i - 1]
        b[..., i] += -w * c[..., i - 1]
        d[..., i] += -w * d[..., i - 1]
    out = np.empty_like(a)
    out[..., -1] = d[..., -1] / b[..., -1]
    for i in range(n - 2, -1, -1):
        out[..., i] = (d[..., i] - c[..., i] * out[..., i + 1]) / b[..., i]
    return out


def _forward_column(cp_prev, dp_prev, a, b, c, d):
    denom = 1.0 / (b - a * cp_prev)
    return c * denom, (d - a * dp_prev) * denom


def _backward_column(x_next, cp, dp):
    return dp - cp * x_next


def _stack_columns(*columns):
    return jnp.stack(columns, axis=1)


def _prepare_columns(inputs: Diagonals, size: Size) -> dict[str, Any]:
    """Columns on the device (data already laid out per item), steps compiled AOT."""
    columns = jax.device_put([tuple(v[:, i] for v in inputs) for i in range(inputs.a.shape[1])])
    zero = jax.device_put(np.zeros(inputs.a.shape[0], inputs.a.dtype))
    first = columns[0]
    forward = jax.jit(_forward_column).lower(zero, zero, *first).compile()
    backward = jax.jit(_backward_column).lower(zero, zero, zero).compile()
    stack = jax.jit(_stack_columns).lower(*[zero] * len(columns)).compile()
    return {"columns": columns, "zero": zero, "steps": (forward, backward, stack)}


def _run_columns(prepared: dict[str, Any], synchronize: bool) -> jax.Array:
    forward, backward, stack = prepared["steps"]
    wait = jax.block_until_ready if synchronize else (lambda value: value)
    cp = dp = prepared["zero"]
    primes = []
    for a, b, c, d in prepared["columns"]:
        cp, dp = wait(forward(cp, dp, a, b, c, d))
        primes.append((cp, dp))
    x = prepared["zero"]
    solution = []
    for cp, dp in reversed(primes):
        x = wait(backward(x, cp, dp))
        solution.append(x)
    return stack(*reversed(solution))


def jax_columns_backend(name: str, synchronize: bool, description: str) -> Backend:
    return Backend(
        name=name,
        strategy=Strategy.SEQUENTIAL,
        engine="jax",
        prepare=_prepare_columns,
        run=lambda prepared: _run_columns(prepared, synchronize),
        description=description,
    )

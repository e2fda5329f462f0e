"""Python-loop sweeps: the NumPy code of JAX issue #2491 and a per-column JAX dispatch.

``numpy_sweep`` loops over the n axis in Python, vectorised over the batch, exactly as
the issue's ``tdma_naive`` (on copies, since that code overwrites b and d).
The JAX version runs the same sweep with one jitted step per column called from Python:
2n dispatches per solve (the backward step writes its column into a donated output
buffer in place), so it is bound by dispatch overhead when the batch is small. ``synchronize=True``
waits for every step before the next (the "wait after each call" pattern, e.g. a
``float()`` or logging inside the loop); ``False`` queues them and waits once.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from scanbench import Backend, Size, Strategy, loop_backend

from .problem import Diagonals


def numpy_sweep(diagonals: Diagonals) -> np.ndarray:
    """The issue's ``tdma_naive``, on copies of b and d (which it overwrites)."""
    a, b, c, d = diagonals
    return tdma_naive(Diagonals(a, b.copy(), c, d.copy()))


def tdma_naive(diagonals: Diagonals) -> np.ndarray:
    """The NumPy code of JAX issue #2491 as published: it updates ``b`` and ``d`` in place
    (right once, wrong on every later call with the same arrays)."""
    a, b, c, d = diagonals
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


def _backward_column(x_next, cp, dp, out, i):
    x = dp - cp * x_next
    return x, lax.dynamic_update_slice_in_dim(out, x[:, None], i, axis=1)


def _prepare_columns(inputs: Diagonals, size: Size) -> dict[str, Any]:
    """Columns and column indices on the device (data already laid out per item), the
    two steps compiled ahead of time; the output buffer is donated to each backward step."""
    batch, n = inputs.a.shape
    columns = jax.device_put([tuple(v[:, i] for v in inputs) for i in range(n)])
    indices = jax.device_put([np.int32(i) for i in range(n)])
    zero = jax.device_put(np.zeros(batch, inputs.a.dtype))
    out = jax.ShapeDtypeStruct((batch, n), inputs.a.dtype)
    forward = jax.jit(_forward_column).lower(zero, zero, *columns[0]).compile()
    backward = (
        jax.jit(_backward_column, donate_argnums=3)
        .lower(zero, zero, zero, out, indices[0])
        .compile()
    )
    return {"columns": columns, "indices": indices, "zero": zero, "steps": (forward, backward)}


def _run_columns(prepared: dict[str, Any], synchronize: bool) -> jax.Array:
    forward, backward = prepared["steps"]
    wait = jax.block_until_ready if synchronize else (lambda value: value)
    zero = prepared["zero"]
    cp = dp = zero
    primes = []
    for a, b, c, d in prepared["columns"]:
        cp, dp = wait(forward(cp, dp, a, b, c, d))
        primes.append((cp, dp))
    x = zero
    out = jnp.empty((zero.shape[0], len(primes)), zero.dtype)
    for (cp, dp), i in zip(reversed(primes), reversed(prepared["indices"]), strict=True):
        x, out = wait(backward(x, cp, dp, out, i))
    return out


def jax_columns_backend(name: str, synchronize: bool, description: str) -> Backend:
    return loop_backend(
        name,
        Strategy.SEQUENTIAL,
        _prepare_columns,
        lambda prepared: _run_columns(prepared, synchronize),
        description=description,
        executables=_executables,
    )


def _executables(prepared: dict[str, Any]) -> dict[str, tuple[Any, int]]:
    forward, backward = prepared["steps"]
    n = len(prepared["columns"])
    return {"forward_column": (forward, n), "backward_column": (backward, n)}

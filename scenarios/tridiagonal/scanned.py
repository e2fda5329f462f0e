"""``lax.scan`` Thomas solvers: the public issue's kernel and the time-major fix.

The issue's kernel (JAX #2491) transposes (batch, n) -> (n, batch) *inside* the jitted
function and reverses with ``[::-1]``, so every call pays transposes and copies around the
two scans. The time-major kernel takes (n, batch) inputs laid out that way by the caller
(the transposes move out of the hot path) and runs the backward sweep with
``reverse=True``; ``unroll`` trades loop overhead for code size.
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
from jax import lax

from .problem import Diagonals


def _forward_step(last_primes, diagonals_i):
    last_cp, last_dp = last_primes
    a, b, c, d = diagonals_i
    denom = 1.0 / (b - a * last_cp)
    cp = c * denom
    dp = (d - a * last_dp) * denom
    return (cp, dp), (cp, dp)


def _backward_step(last_x, primes_i):
    cp, dp = primes_i
    x = dp - cp * last_x
    return x, x


def issue_kernel(diagonals: Diagonals):
    """The kernel as written in JAX issue #2491: batch-major in, transposes inside."""
    a, b, c, d = diagonals
    init = jnp.zeros(a.shape[:-1], a.dtype)
    _, (cp, dp) = lax.scan(_forward_step, (init, init), (a.T, b.T, c.T, d.T))
    _, x = lax.scan(_backward_step, init, (cp[::-1], dp[::-1]))
    return x[::-1].T


def time_major_kernel(diagonals: Diagonals, unroll: int = 1):
    """Thomas sweeps over time-major (n, batch) diagonals; returns x as (n, batch)."""
    a = diagonals.a
    init = jnp.zeros(a.shape[1:], a.dtype)
    _, primes = lax.scan(_forward_step, (init, init), tuple(diagonals), unroll=unroll)
    _, x = lax.scan(_backward_step, init, primes, reverse=True, unroll=unroll)
    return x


def to_time_major(diagonals: Diagonals) -> Diagonals:
    """Host-side layout change (batch, n) -> (n, batch), contiguous."""
    return Diagonals(*(np.ascontiguousarray(v.T) for v in diagonals))


def from_time_major(x):
    """(n, batch) -> (batch, n) on the host, for the reference check."""
    return np.asarray(x).T


def time_major_unrolled(unroll: int):
    return functools.partial(time_major_kernel, unroll=unroll)

"""``jax.vmap`` over systems of a per-system ``lax.scan`` Thomas solver."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from .problem import Diagonals
from .scanned import _backward_step, _forward_step


def solve_one(a, b, c, d):
    """One system: diagonals and right-hand side of shape (n,)."""
    zero = jnp.zeros((), a.dtype)
    _, primes = lax.scan(_forward_step, (zero, zero), (a, b, c, d))
    _, x = lax.scan(_backward_step, zero, primes, reverse=True)
    return x


def vmapped_kernel(diagonals: Diagonals):
    """All systems: ``vmap(solve_one)`` over the leading (batch) axis."""
    return jax.vmap(solve_one)(*diagonals)

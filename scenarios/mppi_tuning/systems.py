"""Closed-loop control tasks for MPPI, in JAX: damped pendulum and cart-pole swing-up.

Each system integrates ``x' = f(x, u)`` with one RK4 step per control interval ``dt``
(zero-order hold on ``u``), so a state is the next *state*, never its derivative (the
public example this scenario replaces returned the derivative as the next state and its
rollouts blew up). Both start hanging down near ``theta = pi``; the goal is upright.

The dynamics and costs are written on a state's *components* (a tuple of arrays, one per
state variable: ``theta, omega``), so that MPPI's K rollouts run as K-wide elementwise
loops that XLA fuses into one kernel per RK4 step. `System.step` and `System.cost` take
and return the usual ``(..., dim)`` arrays (the plant, the episode starts). The angle is
wrapped as ``theta - 2 pi round(theta / 2 pi)``, not ``(theta + pi) mod 2 pi - pi`` (the
same value but at the boundary, where its square is the same): XLA:CPU lowers the modulo
to a remainder sequence that costs more than the whole RK4 step (performance log,
2026-11-23, "MPPI at its best").
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp

from scanbench import UnknownNameError

Array = jax.Array
Components = tuple[Array, ...]

# Pendulum: theta'' = -(g / l) sin(theta) - b theta' + u / (m l^2); theta = 0 is upright.
PENDULUM = {"g": 9.81, "l": 1.0, "m": 1.0, "b": 0.1, "u_max": 5.0}
# Cart-pole (Barto et al. 1983 equations, frictionless): state (x, x', theta, theta').
CARTPOLE = {"g": 9.81, "m_cart": 1.0, "m_pole": 0.1, "l": 0.5, "u_max": 10.0}
TWO_PI = 2.0 * math.pi


def angle_error(theta: Array) -> Array:
    """Angle to upright, wrapped to [-pi, pi] (``theta - 2 pi round(theta / 2 pi)``)."""
    return theta - TWO_PI * jnp.round(theta / TWO_PI)


# sin and cos as straight-line float32 arithmetic: Cody-Waite reduction by pi/2 in three
# parts, then the Cephes single-precision minimax polynomials on [-pi/4, pi/4] (within
# float32 rounding of sin and cos for |x| <= 200), the quadrant picked by selects. The
# same arithmetic as the Numba kernels (`numba_lanes._sincos`). XLA:CPU's own jnp.sin is
# far slower than a multiply-add and was most of the rollout (performance log,
# 2026-11-23, "MPPI at its best").
_TWO_OVER_PI = 2.0 / math.pi
_PIO2 = (1.5703125, 4.837512969970703125e-4, 7.54978995489188216e-8)
_SIN = (-1.6666654611e-1, 8.3321608736e-3, -1.9515295891e-4)
_COS = (4.166664568298827e-2, -1.388731625493765e-3, 2.443315711809948e-5)


def sincos(x: Array) -> tuple[Array, Array]:
    """(sin x, cos x), float32-accurate, in arithmetic XLA vectorises (see above)."""
    n = jnp.round(x * _TWO_OVER_PI)
    quadrant = n.astype(jnp.int32) & 3
    r = ((x - n * _PIO2[0]) - n * _PIO2[1]) - n * _PIO2[2]
    z = r * r
    s = r + r * z * (_SIN[0] + z * (_SIN[1] + z * _SIN[2]))
    c = 1.0 - 0.5 * z + z * z * (_COS[0] + z * (_COS[1] + z * _COS[2]))
    odd = (quadrant & 1) == 1
    sin = jnp.where(odd, c, s) * jnp.where((quadrant & 2) == 2, -1.0, 1.0)
    cos = jnp.where(odd, s, c) * jnp.where(((quadrant + 1) & 2) == 2, -1.0, 1.0)
    return sin.astype(x.dtype), cos.astype(x.dtype)


def pendulum_f(s: Components, u: Array) -> Components:
    p = PENDULUM
    theta, omega = s
    accel = (p["g"] / p["l"]) * sincos(theta)[0] - p["b"] * omega + u / (p["m"] * p["l"] ** 2)
    return omega, accel


def pendulum_cost(s: Components, u: Array) -> Array:
    theta, omega = s
    return angle_error(theta) ** 2 + 0.1 * omega**2 + 0.001 * u**2


def cartpole_f(s: Components, u: Array) -> Components:
    p = CARTPOLE
    _, velocity, theta, omega = s
    total = p["m_cart"] + p["m_pole"]
    sin, cos = sincos(theta)
    temp = (u + p["m_pole"] * p["l"] * omega**2 * sin) / total
    alpha = (p["g"] * sin - cos * temp) / (p["l"] * (4.0 / 3.0 - p["m_pole"] * cos**2 / total))
    accel = temp - p["m_pole"] * p["l"] * alpha * cos / total
    return velocity, accel, omega, alpha


def cartpole_cost(s: Components, u: Array) -> Array:
    position, velocity, theta, omega = s
    return (
        angle_error(theta) ** 2 + 0.1 * position**2 + 0.01 * (velocity**2 + omega**2) + 0.001 * u**2
    )


def _along(s: Components, k: Components, h: float) -> Components:
    return tuple(a + h * b for a, b in zip(s, k, strict=True))


def split(x: Array) -> Components:
    """A ``(..., dim)`` state as its components."""
    return tuple(x[..., i] for i in range(x.shape[-1]))


def join(s: Components) -> Array:
    """Components back to a ``(..., dim)`` state."""
    return jnp.stack(s, axis=-1)


@dataclasses.dataclass(frozen=True)
class System:
    """A control task: dynamics, running cost, start distribution, torque/force limit."""

    name: str
    state_dim: int
    u_max: float
    f: Callable[[Components, Array], Components]
    running_cost: Callable[[Components, Array], Array]
    start: tuple[float, ...]
    start_noise: tuple[float, ...]

    def rk4(self, s: Components, u: Array, dt: float) -> Components:
        """One RK4 step of length ``dt`` on the components, with ``u`` held constant."""
        k1 = self.f(s, u)
        k2 = self.f(_along(s, k1, 0.5 * dt), u)
        k3 = self.f(_along(s, k2, 0.5 * dt), u)
        k4 = self.f(_along(s, k3, dt), u)
        return tuple(
            a + (dt / 6.0) * (b1 + 2.0 * b2 + 2.0 * b3 + b4)
            for a, b1, b2, b3, b4 in zip(s, k1, k2, k3, k4, strict=True)
        )

    def step(self, x: Array, u: Array, dt: float) -> Array:
        """One RK4 step of a ``(..., dim)`` state."""
        return join(self.rk4(split(x), u, dt))

    def cost(self, x: Array, u: Array) -> Array:
        """The running cost of a ``(..., dim)`` state."""
        return self.running_cost(split(x), u)

    def initial_state(self, key: Array, dtype=jnp.float32) -> Array:
        """A seeded start near hanging down."""
        noise = jax.random.uniform(key, (self.state_dim,), dtype, -1.0, 1.0)
        return jnp.asarray(self.start, dtype) + noise * jnp.asarray(self.start_noise, dtype)


SYSTEMS = {
    "pendulum": System(
        "pendulum", 2, PENDULUM["u_max"], pendulum_f, pendulum_cost, (jnp.pi, 0.0), (0.3, 0.3)
    ),
    "cartpole": System(
        "cartpole",
        4,
        CARTPOLE["u_max"],
        cartpole_f,
        cartpole_cost,
        (0.0, 0.0, jnp.pi, 0.0),
        (0.2, 0.1, 0.3, 0.3),
    ),
}


def get_system(name: str) -> System:
    if name not in SYSTEMS:
        raise UnknownNameError("system", name, list(SYSTEMS))
    return SYSTEMS[name]

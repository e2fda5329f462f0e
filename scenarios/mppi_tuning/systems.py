"""Closed-loop control tasks for MPPI, in JAX: damped pendulum and cart-pole swing-up.

Each system integrates ``x' = f(x, u)`` with one RK4 step per control interval ``dt``
(zero-order hold on ``u``), so a state is the next *state*, never its derivative (the
public example this scenario replaces returned the derivative as the next state and its
rollouts blew up). Both start hanging down near ``theta = pi``; the goal is upright.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp

from harness.api import UnknownNameError

Array = jax.Array

# Pendulum: theta'' = -(g / l) sin(theta) - b theta' + u / (m l^2); theta = 0 is upright.
PENDULUM = {"g": 9.81, "l": 1.0, "m": 1.0, "b": 0.1, "u_max": 5.0}
# Cart-pole (Barto et al. 1983 equations, frictionless): state (x, x', theta, theta').
CARTPOLE = {"g": 9.81, "m_cart": 1.0, "m_pole": 0.1, "l": 0.5, "u_max": 10.0}


def angle_error(theta: Array) -> Array:
    """Angle to upright, wrapped to [-pi, pi)."""
    return (theta + jnp.pi) % (2 * jnp.pi) - jnp.pi


def pendulum_f(x: Array, u: Array) -> Array:
    p = PENDULUM
    theta, omega = x[..., 0], x[..., 1]
    accel = (p["g"] / p["l"]) * jnp.sin(theta) - p["b"] * omega + u / (p["m"] * p["l"] ** 2)
    return jnp.stack([omega, accel], axis=-1)


def pendulum_cost(x: Array, u: Array) -> Array:
    return angle_error(x[..., 0]) ** 2 + 0.1 * x[..., 1] ** 2 + 0.001 * u**2


def cartpole_f(x: Array, u: Array) -> Array:
    p = CARTPOLE
    theta, omega, velocity = x[..., 2], x[..., 3], x[..., 1]
    total = p["m_cart"] + p["m_pole"]
    sin, cos = jnp.sin(theta), jnp.cos(theta)
    temp = (u + p["m_pole"] * p["l"] * omega**2 * sin) / total
    alpha = (p["g"] * sin - cos * temp) / (p["l"] * (4.0 / 3.0 - p["m_pole"] * cos**2 / total))
    accel = temp - p["m_pole"] * p["l"] * alpha * cos / total
    return jnp.stack([velocity, accel, omega, alpha], axis=-1)


def cartpole_cost(x: Array, u: Array) -> Array:
    return (
        angle_error(x[..., 2]) ** 2
        + 0.1 * x[..., 0] ** 2
        + 0.01 * (x[..., 1] ** 2 + x[..., 3] ** 2)
        + 0.001 * u**2
    )


@dataclasses.dataclass(frozen=True)
class System:
    """A control task: dynamics, running cost, start distribution, torque/force limit."""

    name: str
    state_dim: int
    u_max: float
    f: Callable[[Array, Array], Array]
    cost: Callable[[Array, Array], Array]
    start: tuple[float, ...]
    start_noise: tuple[float, ...]

    def step(self, x: Array, u: Array, dt: float) -> Array:
        """One RK4 step of length ``dt`` with ``u`` held constant."""
        k1 = self.f(x, u)
        k2 = self.f(x + 0.5 * dt * k1, u)
        k3 = self.f(x + 0.5 * dt * k2, u)
        k4 = self.f(x + dt * k3, u)
        return x + (dt / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)

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

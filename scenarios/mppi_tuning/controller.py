"""A pure MPPI controller: ``command(key, nominal, x, params, config) -> (u, nominal)``.

Static settings live in the frozen ``Config``; the tuned values (temperature ``lambda_``
and noise std ``sigma``) in the pytree ``Params``, so the controller can be vmapped over
candidates. Nothing is mutated: the warm-started nominal control sequence is the
controller's state, passed in and returned.

Tuning searches ``z = (log lambda, log sigma)``; ``params_from_candidate`` clips ``z`` to
the bounds ``LAMBDA_BOUNDS`` and ``SIGMA_BOUNDS`` before exponentiating (documented,
enforced; a candidate outside them is evaluated at the nearest bound).
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from scanbench import InputError

from .systems import System, get_system, split

LAMBDA_BOUNDS = (1e-2, 1e2)
SIGMA_BOUNDS = (0.05, 5.0)


class Params(NamedTuple):
    """Tuned MPPI parameters (a pytree: can be batched over candidates)."""

    lambda_: jax.Array
    sigma: jax.Array


@dataclasses.dataclass(frozen=True)
class Config:
    """Static MPPI and tuning settings.

    Attributes:
        system: ``pendulum`` or ``cartpole``.
        samples: K sampled control sequences per command.
        horizon: T steps per sampled sequence.
        dt: control interval in seconds.
        control_steps: S closed-loop steps per episode.
        episodes: E episodes per candidate evaluation (common to all candidates).
        population: P candidates per CMA-ES generation.
        generations: G generations.
        sigma_init: CMA-ES initial step size in log-parameter space (applied).
    """

    system: str
    samples: int
    horizon: int
    dt: float
    control_steps: int
    episodes: int
    population: int
    generations: int
    sigma_init: float = 1.0

    def __post_init__(self) -> None:
        get_system(self.system)
        for name in ("samples", "horizon", "control_steps", "episodes", "generations"):
            if getattr(self, name) < 1:
                raise InputError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.population < 2:
            raise InputError(f"population must be >= 2 for CMA-ES, got {self.population}")
        if not self.dt > 0:
            raise InputError(f"dt must be > 0, got {self.dt}")
        if not self.sigma_init > 0:
            raise InputError(f"sigma_init must be > 0, got {self.sigma_init}")

    @property
    def dynamics(self) -> System:
        return get_system(self.system)


def check_bounds(lambda_bounds: tuple[float, float], sigma_bounds: tuple[float, float]) -> None:
    """Bounds must be positive and ordered (they are searched in log space)."""
    for name, (low, high) in (("lambda", lambda_bounds), ("sigma", sigma_bounds)):
        if not (low > 0 and high > 0):
            raise InputError(f"{name} bounds must be > 0, got ({low}, {high})")
        if not low < high:
            raise InputError(f"{name} bounds must satisfy low < high, got ({low}, {high})")


check_bounds(LAMBDA_BOUNDS, SIGMA_BOUNDS)
LOG_LOWER = (math.log(LAMBDA_BOUNDS[0]), math.log(SIGMA_BOUNDS[0]))
LOG_UPPER = (math.log(LAMBDA_BOUNDS[1]), math.log(SIGMA_BOUNDS[1]))


def params_from_candidate(z: jax.Array) -> Params:
    """``z = (log lambda, log sigma)`` -> Params, clipped to the bounds."""
    z = jnp.clip(z, jnp.asarray(LOG_LOWER, z.dtype), jnp.asarray(LOG_UPPER, z.dtype))
    return Params(jnp.exp(z[..., 0]), jnp.exp(z[..., 1]))


def rollout_costs(x: jax.Array, controls: jax.Array, config: Config) -> jax.Array:
    """Cost of each of K control sequences, time-major (T, K), from state x, over the
    horizon.

    The K rollouts advance as one tuple of K-wide state components with the cost summed
    in the carry, so each horizon step is one or two fused elementwise kernels (see
    `scanbench.scenarios.mppi_tuning.systems`)."""
    system = config.dynamics

    def step(carry, u):
        states, total = carry
        states = system.rk4(states, u, config.dt)
        return (states, total + system.running_cost(states, u)), None

    count = controls.shape[1]
    starts = tuple(jnp.broadcast_to(component, (count,)) for component in split(x))
    zero = jnp.zeros((count,), controls.dtype)
    (_, costs), _ = lax.scan(step, (starts, zero), controls)
    return costs


def noise_shape(config: Config) -> tuple[int, int]:
    """The standard-normal draw of one control step: time-major (T, K), as the rollouts
    consume it (a (K, T) draw cost a transpose per step)."""
    return (config.horizon, config.samples)


def command(
    key: jax.Array, nominal: jax.Array, x: jax.Array, params: Params, config: Config
) -> tuple[jax.Array, jax.Array]:
    """One MPPI update: sample, roll out, weight, return (u, next warm-started nominal)."""
    return command_with_noise(draw_noise(key, config, nominal.dtype), nominal, x, params, config)


def draw_noise(key: jax.Array, config: Config, dtype) -> jax.Array:
    """The standard-normal draw (T, K) a `command` with ``key`` makes."""
    return jax.random.normal(key, noise_shape(config), dtype)


def command_with_noise(
    noise: jax.Array, nominal: jax.Array, x: jax.Array, params: Params, config: Config
) -> tuple[jax.Array, jax.Array]:
    """`command` given its standard-normal draw ``noise`` (T, K): roll out, weight, return
    (u, next warm-started nominal)."""
    system = config.dynamics
    dtype = nominal.dtype
    sigma, lambda_ = jnp.asarray(params.sigma, dtype), jnp.asarray(params.lambda_, dtype)
    controls = jnp.clip(nominal[:, None] + sigma * noise, -system.u_max, system.u_max)
    costs = rollout_costs(x, controls, config)
    weights = jax.nn.softmax(-(costs - costs.min()) / lambda_)
    nominal = controls @ weights
    next_nominal = jnp.concatenate([nominal[1:], jnp.zeros_like(nominal[:1])])
    return nominal[0], next_nominal

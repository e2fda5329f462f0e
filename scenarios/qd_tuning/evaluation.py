"""A QD evaluation of one MPPI parameter set: objective and two behaviour measures.

A solution is ``z = (log lambda, log sigma, m)``: the MPPI temperature and noise std (as
in ``mppi_tuning``, clipped to its bounds) and ``m``, the mean of the sampled control
noise in units of ``NOISE_MEAN_SCALE x u_max`` (clipped to [-1, 1]): the sampled controls
are ``nominal + sigma noise + m NOISE_MEAN_SCALE u_max``. All three are continuous and
vmappable, so the archive fills along both measures.

One evaluation runs E closed-loop episodes (fixed keys: every solution of every
generation sees the same starts and the same noise, so a solution's values do not depend
on when it was evaluated) and returns ``(objective, effort, angle)``:

- objective: ``-mean running cost`` (pyribs maximises);
- effort: mean over the closed-loop steps of ``u^2 / u_max^2``, in [0, 1];
- angle: mean over the closed-loop steps of ``|angle to upright| / pi``, in [0, 1].

Both measures are means over the whole run, not final values: a final angle error
amplifies float32 rounding through the closed loop (2e-2 against a float64 evaluation,
measured), a mean over the run smooths it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from scanbench.scenarios.mppi_tuning.controller import (
    LOG_LOWER,
    LOG_UPPER,
    Config,
    Params,
    command_with_noise,
    draw_noise,
)
from scanbench.scenarios.mppi_tuning.objective import episode_start, step_key
from scanbench.scenarios.mppi_tuning.systems import angle_error

SOLUTION_DIM = 3
NOISE_MEAN_SCALE = 0.5
# the measures' fixed ranges (the archive's grid spans them)
MEASURE_RANGES = ((0.0, 1.0), (0.0, 1.0))
MEASURE_NAMES = ("control effort: mean u^2 / u_max^2", "mean |angle to upright| / pi")
# index of the pole angle in each system's state
ANGLE_INDEX = {"pendulum": 0, "cartpole": 2}
# the initial CMA-ES mean of every emitter: lambda = 1, sigma = 1, no noise mean
INITIAL_SOLUTION = (0.0, 0.0, 0.0)


def solution_bounds() -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The box a solution is clipped to before it is evaluated."""
    return (*LOG_LOWER, -1.0), (*LOG_UPPER, 1.0)


def decode(z: jax.Array, u_max: float) -> tuple[Params, jax.Array]:
    """``z`` -> (Params, noise mean), clipped to the bounds."""
    lower, upper = solution_bounds()
    z = jnp.clip(z, jnp.asarray(lower, z.dtype), jnp.asarray(upper, z.dtype))
    mean = z[..., 2] * (NOISE_MEAN_SCALE * u_max)
    return Params(jnp.exp(z[..., 0]), jnp.exp(z[..., 1])), mean


def episode(key: jax.Array, z: jax.Array, config: Config) -> jax.Array:
    """(mean cost, mean effort, mean angle) of one closed-loop episode of S steps."""
    system = config.dynamics
    params, noise_mean = decode(z, system.u_max)
    x0, run_key = episode_start(key, config)
    nominal = jnp.zeros(config.horizon, x0.dtype)
    angle = ANGLE_INDEX[config.system]

    def step(carry, s):
        x, nominal, totals = carry
        noise = draw_noise(step_key(run_key, s), config, x0.dtype) + noise_mean / params.sigma
        u, nominal = command_with_noise(noise, nominal, x, params, config)
        x = system.step(x, u, config.dt)
        effort = (u / system.u_max) ** 2
        error = jnp.abs(angle_error(x[angle])) / jnp.pi
        return (x, nominal, totals + jnp.stack([system.cost(x, u), effort, error])), None

    init = (x0, nominal, jnp.zeros(3, x0.dtype))
    (_, _, totals), _ = lax.scan(step, init, jnp.arange(config.control_steps))
    return totals / config.control_steps


def evaluate(keys: jax.Array, z: jax.Array, config: Config) -> jax.Array:
    """``[objective, effort, angle]`` of solution ``z`` (3,), averaged over the episode
    keys, float32 whatever the optimizer's dtype."""
    z = jnp.asarray(z, jnp.float32)
    cost, effort, angle = jax.vmap(episode, in_axes=(0, None, None))(keys, z, config).mean(0)
    return jnp.stack([-cost, effort, angle])


def evaluate_population(keys: jax.Array, solutions: jax.Array, config: Config) -> jax.Array:
    """`evaluate` of every solution (N, 3) -> (N, 3): objective, effort, angle."""
    return jax.vmap(evaluate, in_axes=(None, 0, None))(keys, solutions, config)

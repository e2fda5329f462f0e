"""The closed-loop MPPI evaluation in Numba (``prange`` over candidates), float64.

It consumes exactly the draws the JAX controller makes (``objective.episode_noise``:
standard-normal noise of shape (E, S, T, K) and the episode starts), so both evaluate the
same objective; only the arithmetic differs (float64 here, float32 in JAX).
The dynamics mirror ``systems.py`` line by line (RK4, same constants).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from .controller import LOG_LOWER, LOG_UPPER
from .systems import CARTPOLE, PENDULUM

SYSTEM_CODES = {"pendulum": 0, "cartpole": 1}
_P = (PENDULUM["g"], PENDULUM["l"], PENDULUM["m"], PENDULUM["b"])
_C = (CARTPOLE["g"], CARTPOLE["m_cart"], CARTPOLE["m_pole"], CARTPOLE["l"])


@numba.njit(cache=True, inline="always")
def _angle_error(theta):
    return theta - 2.0 * math.pi * np.round(theta / (2.0 * math.pi))


@numba.njit(cache=True)
def _derivative(system, x, u, out):
    if system == 0:
        g, length, mass, damping = _P
        out[0] = x[1]
        out[1] = (g / length) * math.sin(x[0]) - damping * x[1] + u / (mass * length**2)
    else:
        g, m_cart, m_pole, length = _C
        total = m_cart + m_pole
        sin, cos = math.sin(x[2]), math.cos(x[2])
        temp = (u + m_pole * length * x[3] ** 2 * sin) / total
        alpha = (g * sin - cos * temp) / (length * (4.0 / 3.0 - m_pole * cos**2 / total))
        out[0] = x[1]
        out[1] = temp - m_pole * length * alpha * cos / total
        out[2] = x[3]
        out[3] = alpha


@numba.njit(cache=True)
def _cost(system, x, u):
    if system == 0:
        return _angle_error(x[0]) ** 2 + 0.1 * x[1] ** 2 + 0.001 * u**2
    return _angle_error(x[2]) ** 2 + 0.1 * x[0] ** 2 + 0.01 * (x[1] ** 2 + x[3] ** 2) + 0.001 * u**2


@numba.njit(cache=True)
def _rk4(system, x, u, dt, k1, k2, k3, k4, tmp):
    n = x.shape[0]
    _derivative(system, x, u, k1)
    for i in range(n):
        tmp[i] = x[i] + 0.5 * dt * k1[i]
    _derivative(system, tmp, u, k2)
    for i in range(n):
        tmp[i] = x[i] + 0.5 * dt * k2[i]
    _derivative(system, tmp, u, k3)
    for i in range(n):
        tmp[i] = x[i] + dt * k3[i]
    _derivative(system, tmp, u, k4)
    for i in range(n):
        x[i] += (dt / 6.0) * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i])


@numba.njit(cache=True, parallel=True)
def evaluate_population(system, lambdas, sigmas, noise, starts, dt, u_max):
    """Fitness (P,) of candidates (lambda, sigma) on noise (E, S, T, K), starts (E, dim)."""
    population = lambdas.shape[0]
    episodes, steps, horizon, samples = noise.shape
    dim = starts.shape[1]
    fitness = np.zeros(population)
    for p in numba.prange(population):
        lam, sigma = lambdas[p], sigmas[p]
        x = np.empty(dim)
        xs = np.empty(dim)
        scratch = np.empty((5, dim))
        k1, k2, k3, k4, tmp = scratch[0], scratch[1], scratch[2], scratch[3], scratch[4]
        nominal = np.empty(horizon)
        new = np.empty(horizon)
        controls = np.empty((samples, horizon))
        costs = np.empty(samples)
        total_all = 0.0
        for e in range(episodes):
            for i in range(dim):
                x[i] = starts[e, i]
            nominal[:] = 0.0
            total = 0.0
            for s in range(steps):
                for k in range(samples):
                    xs[:] = x
                    c = 0.0
                    for t in range(horizon):
                        u = nominal[t] + sigma * noise[e, s, t, k]
                        u = min(max(u, -u_max), u_max)
                        controls[k, t] = u
                        _rk4(system, xs, u, dt, k1, k2, k3, k4, tmp)
                        c += _cost(system, xs, u)
                    costs[k] = c
                best = costs.min()
                weight_sum = 0.0
                for k in range(samples):
                    costs[k] = math.exp(-(costs[k] - best) / lam)
                    weight_sum += costs[k]
                for t in range(horizon):
                    acc = 0.0
                    for k in range(samples):
                        acc += costs[k] * controls[k, t]
                    new[t] = acc / weight_sum
                u0 = new[0]
                for t in range(horizon - 1):
                    nominal[t] = new[t + 1]
                nominal[horizon - 1] = 0.0
                _rk4(system, x, u0, dt, k1, k2, k3, k4, tmp)
                total += _cost(system, x, u0)
            total_all += total / steps
        fitness[p] = total_all / episodes
    return fitness


def evaluate_candidates(config, population, noise, starts) -> np.ndarray:
    """Fitness (P,) of candidates z = (log lambda, log sigma), clipped to the bounds as
    ``params_from_candidate`` does, on the draws of ``objective.episode_noise``."""
    z = np.clip(np.asarray(population, np.float64), LOG_LOWER, LOG_UPPER)
    return evaluate_population(
        SYSTEM_CODES[config.system],
        np.exp(z[:, 0]),
        np.exp(z[:, 1]),
        np.asarray(noise),
        np.asarray(starts),
        config.dt,
        config.dynamics.u_max,
    )


def compile_for(system: str) -> None:
    """Compile on tiny inputs (prepare calls this, so timed calls never compile)."""
    noise = np.zeros((1, 1, 2, 2), np.float32)
    starts = np.zeros((1, 4 if system == "cartpole" else 2), np.float32)
    ones = np.ones(2)
    evaluate_population(SYSTEM_CODES[system], ones, ones, noise, starts, 0.05, 1.0)

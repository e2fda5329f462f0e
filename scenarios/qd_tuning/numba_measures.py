"""The float32 Numba evaluation of QD solutions: objective and both measures.

`mppi_tuning.numba_lanes.evaluate_population` with the noise mean added to the sampled
controls and the two measures accumulated over the closed loop: the same rollout kernel
(``_rollouts``: the K samples as vectorised lanes), the same plant step, ``prange`` over
solutions. It is fed the standard-normal draws and starts the JAX evaluation makes
(`mppi_tuning.objective.episode_noise`), so it evaluates the same objective.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from scanbench.scenarios.mppi_tuning.numba_lanes import (
    CARTPOLE_CODE,
    F,
    _plant_step,
    _rollouts,
    _wrap,
)

_INV_PI = F(1.0 / math.pi)


@numba.njit(cache=True, fastmath=True, parallel=True)
def evaluate_solutions(system, lambdas, sigmas, means, noise, starts, u_max):
    """(objective, effort, angle) (N, 3) of N solutions, decoded as (lambda, sigma, noise
    mean), on time-major noise (E, S, T, K) and starts (E, dim), all float32."""
    population = lambdas.shape[0]
    episodes, steps, horizon, count = noise.shape
    dim = starts.shape[1]
    angle_index = 2 if system == CARTPOLE_CODE else 0
    values = np.zeros((population, 3), np.float32)
    for c in numba.prange(population):
        lam, sigma, mean = lambdas[c], sigmas[c], means[c]
        x = np.empty(dim, np.float32)
        controls = np.empty((horizon, count), np.float32)
        costs = np.empty(count, np.float32)
        nominal = np.empty(horizon, np.float32)
        totals = np.zeros(3, np.float32)
        for e in range(episodes):
            for i in range(dim):
                x[i] = starts[e, i]
            nominal[:] = F(0.0)
            cost_sum, effort_sum, angle_sum = F(0.0), F(0.0), F(0.0)
            for s in range(steps):
                for t in range(horizon):
                    base = nominal[t] + mean
                    for k in range(count):
                        u = base + sigma * noise[e, s, t, k]
                        controls[t, k] = min(max(u, -u_max), u_max)
                _rollouts(system, x, controls, costs)
                best = costs.min()
                weight_sum = F(0.0)
                for k in range(count):
                    costs[k] = math.exp(-(costs[k] - best) / lam)
                    weight_sum += costs[k]
                for t in range(horizon):
                    acc = F(0.0)
                    for k in range(count):
                        acc += costs[k] * controls[t, k]
                    nominal[t] = acc / weight_sum
                u0 = nominal[0]
                for t in range(horizon - 1):
                    nominal[t] = nominal[t + 1]
                nominal[horizon - 1] = F(0.0)
                cost_sum += _plant_step(system, x, u0)
                effort_sum += (u0 / u_max) * (u0 / u_max)
                angle_sum += abs(_wrap(x[angle_index])) * _INV_PI
            totals[0] -= cost_sum / F(steps)
            totals[1] += effort_sum / F(steps)
            totals[2] += angle_sum / F(steps)
        for i in range(3):
            values[c, i] = totals[i] / F(episodes)
    return values

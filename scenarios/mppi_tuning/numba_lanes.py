"""Float32 Numba MPPI written the way a CPU wants it: the K samples as lanes.

For each control step the K rollouts advance together, time loop outer and sample loop
inner, over component arrays (``theta[k]``, ``omega[k]``): the inner loop has no branches
and unit stride, so LLVM vectorises it, with ``fastmath`` and float32 throughout (every
constant a float32, so nothing is promoted to float64). Two kernels share the rollout:

- `evaluate_population`: the whole closed-loop objective of each candidate (``prange``
  over candidates), fed exactly the draws the JAX controller makes
  (``objective.episode_noise``), so it evaluates the same objective as every backend: the
  strong Numba reference of the MPPI scenarios;
- `rollout_roofline`: the same rollouts and running costs alone, no RNG, no weighting, no
  plant, no tuning loop (``prange`` over batches of K lanes): how fast this machine does
  the scenario's arithmetic at all. A backend's "x roofline" is its dynamics steps per
  second against this kernel's, measured in the same run.

The dynamics mirror ``systems.py`` (RK4, same constants, the same angle wrap).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from .systems import CARTPOLE, PENDULUM

F = np.float32
_HALF, _TWO, _SIXTH = F(0.5), F(2.0), F(1.0 / 6.0)
_TWO_PI = F(2.0 * math.pi)
_P_GL, _P_B, _P_INV = (
    F(PENDULUM["g"] / PENDULUM["l"]),
    F(PENDULUM["b"]),
    F(1.0 / (PENDULUM["m"] * PENDULUM["l"] ** 2)),
)
_C_G, _C_MP, _C_L = F(CARTPOLE["g"]), F(CARTPOLE["m_pole"]), F(CARTPOLE["l"])
_C_TOTAL = F(CARTPOLE["m_cart"] + CARTPOLE["m_pole"])
_C_MPL = F(CARTPOLE["m_pole"] * CARTPOLE["l"])
_C_FOUR_THIRDS = F(4.0 / 3.0)
_P_W_OMEGA = F(0.1)  # pendulum cost: wrap(theta)^2 + 0.1 omega^2 + 0.001 u^2
_C_W_POS, _C_W_VEL = F(0.1), F(0.01)  # cart-pole: ... + 0.1 x^2 + 0.01 (x'^2 + omega^2)
_W_U = F(0.001)
PENDULUM_CODE, CARTPOLE_CODE = 0, 1
SYSTEM_CODES = {"pendulum": PENDULUM_CODE, "cartpole": CARTPOLE_CODE}


@numba.njit(cache=True, fastmath=True, inline="always")
def _wrap(theta):
    return theta - _TWO_PI * np.rint(theta / _TWO_PI)  # np.round gives float64 in Numba


# sin and cos of float32 in straight-line arithmetic (no libm call), so that the lane loop
# vectorises without an SVML library: Cody-Waite reduction by pi/2 in three parts, then
# the Cephes single-precision minimax polynomials on [-pi/4, pi/4] (~1 ulp for |x| up to
# a few thousand radians), the quadrant chosen by arithmetic selects.
_TWO_OVER_PI = F(2.0 / math.pi)
_PIO2_1, _PIO2_2, _PIO2_3 = F(1.5703125), F(4.837512969970703125e-4), F(7.54978995489188216e-8)
_S1, _S2, _S3 = F(-1.6666654611e-1), F(8.3321608736e-3), F(-1.9515295891e-4)
_C1, _C2, _C3 = F(4.166664568298827e-2), F(-1.388731625493765e-3), F(2.443315711809948e-5)
_ONE = F(1.0)


@numba.njit(cache=True, fastmath=True, inline="always")
def _sincos(x):
    n = np.rint(x * _TWO_OVER_PI)
    quadrant = np.int32(n) & 3
    r = ((x - n * _PIO2_1) - n * _PIO2_2) - n * _PIO2_3
    z = r * r
    s = r + r * z * (_S1 + z * (_S2 + z * _S3))
    c = _ONE - _HALF * z + z * z * (_C1 + z * (_C2 + z * _C3))
    odd = F(quadrant & 1)
    sin = (s + odd * (c - s)) * F(1 - (quadrant & 2))
    cos = (c + odd * (s - c)) * F(1 - ((quadrant + 1) & 2))
    return sin, cos


@numba.njit(cache=True, fastmath=True, inline="always")
def _pendulum_accel(theta, omega, u):
    return _P_GL * _sincos(theta)[0] - _P_B * omega + u * _P_INV


@numba.njit(cache=True, fastmath=True, inline="always")
def _pendulum_step(theta, omega, u, dt):
    """One RK4 step and the running cost of the new state (scalars, float32)."""
    half = _HALF * dt
    k1a, k1w = omega, _pendulum_accel(theta, omega, u)
    k2a = omega + half * k1w
    k2w = _pendulum_accel(theta + half * k1a, k2a, u)
    k3a = omega + half * k2w
    k3w = _pendulum_accel(theta + half * k2a, k3a, u)
    k4a = omega + dt * k3w
    k4w = _pendulum_accel(theta + dt * k3a, k4a, u)
    sixth = _SIXTH * dt
    theta = theta + sixth * (k1a + _TWO * k2a + _TWO * k3a + k4a)
    omega = omega + sixth * (k1w + _TWO * k2w + _TWO * k3w + k4w)
    error = _wrap(theta)
    return theta, omega, error * error + _P_W_OMEGA * omega * omega + _W_U * u * u


@numba.njit(cache=True, fastmath=True, inline="always")
def _cartpole_accels(theta, omega, u):
    sin, cos = _sincos(theta)
    temp = (u + _C_MPL * omega * omega * sin) / _C_TOTAL
    alpha = (_C_G * sin - cos * temp) / (_C_L * (_C_FOUR_THIRDS - _C_MP * cos * cos / _C_TOTAL))
    return temp - _C_MPL * alpha * cos / _C_TOTAL, alpha


@numba.njit(cache=True, fastmath=True, inline="always")
def _cartpole_step(p, v, theta, omega, u, dt):
    half = _HALF * dt
    a1, b1 = _cartpole_accels(theta, omega, u)
    v2, w2 = v + half * a1, omega + half * b1
    a2, b2 = _cartpole_accels(theta + half * omega, w2, u)
    v3, w3 = v + half * a2, omega + half * b2
    a3, b3 = _cartpole_accels(theta + half * w2, w3, u)
    v4, w4 = v + dt * a3, omega + dt * b3
    a4, b4 = _cartpole_accels(theta + dt * w3, w4, u)
    sixth = _SIXTH * dt
    p = p + sixth * (v + _TWO * v2 + _TWO * v3 + v4)
    theta = theta + sixth * (omega + _TWO * w2 + _TWO * w3 + w4)
    v = v + sixth * (a1 + _TWO * a2 + _TWO * a3 + a4)
    omega = omega + sixth * (b1 + _TWO * b2 + _TWO * b3 + b4)
    error = _wrap(theta)
    cost = error * error + _C_W_POS * p * p + _C_W_VEL * (v * v + omega * omega) + _W_U * u * u
    return p, v, theta, omega, cost


@numba.njit(cache=True, fastmath=True, inline="always")
def _rollouts(system, x, controls, costs):
    """Running costs (into ``costs``) of K control sequences ``controls`` (T, K) from state
    ``x``. Each state component is an array of its own, allocated here: with the
    components as rows of one (dim, K) array, LLVM could not prove the cart-pole's four
    rows apart and left the loop scalar (performance log, 2026-11-23, "MPPI at its best")."""
    horizon, count = controls.shape
    for k in range(count):
        costs[k] = F(0.0)
    if system == PENDULUM_CODE:
        theta, omega = np.full(count, x[0], np.float32), np.full(count, x[1], np.float32)
        for t in range(horizon):
            for k in range(count):
                a, w, cost = _pendulum_step(theta[k], omega[k], controls[t, k], DT)
                theta[k], omega[k] = a, w
                costs[k] += cost
        return
    position, velocity = np.full(count, x[0], np.float32), np.full(count, x[1], np.float32)
    theta, omega = np.full(count, x[2], np.float32), np.full(count, x[3], np.float32)
    for t in range(horizon):
        for k in range(count):
            p, v, a, w, cost = _cartpole_step(
                position[k], velocity[k], theta[k], omega[k], controls[t, k], DT
            )
            position[k], velocity[k], theta[k], omega[k] = p, v, a, w
            costs[k] += cost


DT = F(0.1)  # every MPPI size runs at dt = 0.1 s (problem.DT); checked by `check_dt`


def check_dt(dt: float) -> None:
    if F(dt) != DT:
        raise ValueError(f"the float32 Numba kernels are compiled for dt = {DT}, got {dt}")


@numba.njit(cache=True, fastmath=True)
def _plant_step(system, x, u):
    """The closed loop's own step of the state ``x`` (in place); its running cost."""
    if system == PENDULUM_CODE:
        theta, omega, cost = _pendulum_step(x[0], x[1], u, DT)
        x[0], x[1] = theta, omega
        return cost
    p, v, theta, omega, cost = _cartpole_step(x[0], x[1], x[2], x[3], u, DT)
    x[0], x[1], x[2], x[3] = p, v, theta, omega
    return cost


@numba.njit(cache=True, fastmath=True, parallel=True)
def evaluate_population(system, lambdas, sigmas, noise, starts, u_max):
    """Fitness (P,) of candidates (lambda, sigma) on time-major noise (E, S, T, K) and
    starts (E, dim), all float32 (``prange`` over candidates)."""
    population = lambdas.shape[0]
    episodes, steps, horizon, count = noise.shape
    dim = starts.shape[1]
    fitness = np.zeros(population, np.float32)
    for c in numba.prange(population):
        lam, sigma = lambdas[c], sigmas[c]
        x = np.empty(dim, np.float32)
        controls = np.empty((horizon, count), np.float32)
        costs = np.empty(count, np.float32)
        nominal = np.empty(horizon, np.float32)
        total_all = F(0.0)
        for e in range(episodes):
            for i in range(dim):
                x[i] = starts[e, i]
            nominal[:] = F(0.0)
            total = F(0.0)
            for s in range(steps):
                for t in range(horizon):
                    base = nominal[t]
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
                total += _plant_step(system, x, u0)
            total_all += total / F(steps)
        fitness[c] = total_all / F(episodes)
    return fitness


@numba.njit(cache=True, fastmath=True, parallel=True)
def rollout_roofline(system, starts, controls):
    """Costs (R, K) of R batches of K rollouts, each from ``starts[r]`` under the same
    ``controls`` (T, K): the scenario's arithmetic alone (``prange`` over batches)."""
    batches = starts.shape[0]
    count = controls.shape[1]
    out = np.empty((batches, count), np.float32)
    for r in numba.prange(batches):
        _rollouts(system, starts[r], controls, out[r])
    return out

"""The ``roofline`` of the MPPI scenarios: their arithmetic alone, as fast as Numba runs it.

Every backend's work is P x G x E x S batches of K rollouts of T RK4 steps (the
``dynamics_steps`` of `problem.work`). This kernel does exactly that many steps, the same
dynamics and running cost (`numba_lanes.rollout_roofline`: float32, the K samples as
vectorised lanes, ``prange`` over batches), and nothing else: no RNG, no weighting, no
closed loop, no CMA-ES. Its time is a limit, not a rival: the reports give every backend
its "x roofline" (median / this median, the same work) and leave it out of the ranking.

It is checked against the same arithmetic in JAX (`controller.rollout_costs` on a few
batches), not against the scenario's reference (it computes no tuning result). That JAX
program is compiled once per process (`scanbench.compile_reference`): its first check and
the check of its last timed output use the same executable. Called eagerly, each of the
four batches compiled its scan anew, 1.0-1.5 s a check, twice a cell, the second time
in the quiet stage that holds the other cell stopped (performance log, 2026-12-01).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from scanbench import Backend, MismatchError, Strategy, compile_reference, host_backend

from .controller import Config, noise_shape, rollout_costs
from .objective import episode_keys, episode_noise, generation_key
from .problem import MppiInputs

CHECKED_BATCHES = 4  # batches recomputed in JAX by the check
RTOL = 1e-3  # float32 sums of T costs in another order


def _batches(inputs: MppiInputs) -> dict[str, Any]:
    """R = P x G x E x S batches from the episode starts, and one (T, K) control array
    from the first episode's noise (clipped at the limit as the controller does)."""
    from . import numba_lanes  # imports Numba: only the cells that use it

    config = inputs.config
    numba_lanes.check_dt(config.dt)
    root = jax.random.key_data(jax.random.key(inputs.seed))
    noise, starts = episode_noise(episode_keys(generation_key(root, 0), 1), config)
    limit = config.dynamics.u_max
    controls = np.clip(np.asarray(noise[0, 0], np.float32), -limit, limit)
    count = config.population * config.generations * config.episodes * config.control_steps
    start = np.asarray(starts[0], np.float32)
    return {
        "kernel": numba_lanes.rollout_roofline,
        "system": numba_lanes.SYSTEM_CODES[config.system],
        "starts": np.ascontiguousarray(np.broadcast_to(start, (count, start.size))),
        "controls": np.ascontiguousarray(controls),
        "config": config,
    }


def _run(batches: dict[str, Any]) -> np.ndarray:
    return batches["kernel"](batches["system"], batches["starts"], batches["controls"])


@functools.cache
def _jax_rollouts(config: Config, batches: int, dim: int):
    """`rollout_costs` of each of ``batches`` starts (batches, dim) under one (T, K)
    control array, compiled once per configuration."""
    batched = jax.vmap(lambda x, controls: rollout_costs(x, controls, config), (0, None))
    lowered = jax.jit(batched).lower(
        jax.ShapeDtypeStruct((batches, dim), jnp.float32),
        jax.ShapeDtypeStruct(noise_shape(config), jnp.float32),
    )
    return compile_reference(lowered)


def _check(batches: dict[str, Any], costs: np.ndarray) -> float:
    config = batches["config"]
    if costs.shape != (len(batches["starts"]), noise_shape(config)[1]):
        raise MismatchError(f"roofline costs have shape {costs.shape}", float("inf"), RTOL)
    starts = batches["starts"][:CHECKED_BATCHES]
    rollouts = _jax_rollouts(config, *starts.shape)
    expected = np.asarray(rollouts(starts, batches["controls"]))
    error = float(np.max(np.abs(costs[:CHECKED_BATCHES] - expected) / np.abs(expected)))
    if not error <= RTOL:
        raise MismatchError("roofline rollouts differ from the JAX rollouts", error, RTOL)
    return error


def _tiny(batches: dict[str, Any]) -> dict[str, Any]:
    """Two batches: enough to compile the kernel in the untimed prepare."""
    return {**batches, "starts": batches["starts"][:2]}


def roofline_backend(name: str, as_mppi: Callable[[Any], MppiInputs] | None = None) -> Backend:
    """The roofline of a scenario whose work is MPPI episodes; ``as_mppi(inputs)`` gives
    the `MppiInputs` whose P x G x E x S batches are that work (``qd_tuning``: P = its
    emitters x batch), by default the inputs themselves."""

    def layout(inputs: Any) -> dict[str, Any]:
        return _batches(inputs if as_mppi is None else as_mppi(inputs))

    return host_backend(
        name,
        Strategy.ROOFLINE,
        "numba",
        _run,
        description="the scenario's rollouts alone in float32 Numba lanes: the limit "
        "every backend's x roofline is measured against",
        layout=layout,
        warm_inputs=_tiny,
        check=_check,
        parallel=True,  # prange over batches of lanes
    )

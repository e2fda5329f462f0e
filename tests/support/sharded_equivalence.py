"""Run in a subprocess with 8 virtual CPU devices (see test_sharded.py): the sharded MPPI
evaluation against the unsharded one on the same candidates and keys. Prints JSON."""

from __future__ import annotations

import json
import os

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"

import jax
import numpy as np

from scanbench.scenarios.mppi_tuning.objective import episode_keys, evaluate_population
from scanbench.scenarios.mppi_tuning.problem import make_inputs, sizes
from scanbench.scenarios.mppi_tuning.sharded import AXIS, sharded_evaluate
from scanbench.sharding.placement import mesh_1d

config = make_inputs(sizes("pendulum")["smoke"], 0, "float32").config
keys = episode_keys(jax.random.key_data(jax.random.key(3)), config.episodes)
rng = np.random.default_rng(0)
result = {"devices": len(jax.devices())}
for count in (8, 5, 11):  # a multiple of 8, and two that need padding
    population = rng.uniform(-2, 2, size=(count, 2)).astype(np.float32)
    plain = np.asarray(jax.jit(lambda k, p: evaluate_population(k, p, config))(keys, population))
    sharded = np.asarray(jax.jit(sharded_evaluate(config, mesh_1d(AXIS)))(keys, population))
    result[str(count)] = {
        "shape": list(sharded.shape),
        "max_abs_diff": float(np.max(np.abs(plain - sharded))),
        "bitwise_equal": bool(np.array_equal(plain, sharded)),
    }
print(json.dumps(result))

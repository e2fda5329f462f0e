"""Trace 40 one-launch-over-8-devices calls; every device's execution must be seen.

Run as a script (8 virtual CPU devices need their own process). Without the settle time
in `scanbench.probes.trace.recording`, 7 of 100 such traces lost one device's event.
"""

import os

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from scanbench.probes import trace

mesh = Mesh(np.array(jax.devices()), ("d",))
x = jax.device_put(jnp.ones((8, 1000)), NamedSharding(mesh, P("d")))
f = jax.jit(lambda x: jnp.sin(x) * 2 + 1)
jax.block_until_ready(f(x))
seen = []
for _ in range(40):
    with trace.recording() as events:
        jax.block_until_ready(f(x))
    seen.append(trace.count_events(events).executions_by_device)
incomplete = [s for s in seen if s != {str(d): 1 for d in range(8)}]
print(f"incomplete {len(incomplete)} of {len(seen)}: {incomplete[:3]}")
raise SystemExit(1 if incomplete else 0)

"""The devices a cell runs on, for the `sharded` strategy: one host or several.

- ``scanbench run --devices N``: the runner gives each cell's worker N devices: on CPU,
  ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` (virtual devices sharing the
  host's cores; set before jax starts, so only in a fresh worker); on every platform
  ``SCANBENCH_DEVICES=N``, which `cell_devices` honours (the first N of ``jax.devices()``).
- Several hosts: every host runs the same `scanbench run` with ``--coordinator HOST:PORT
  --num-processes K --process-id I`` (or the ``SCANBENCH_COORDINATOR``,
  ``SCANBENCH_NUM_PROCESSES``, ``SCANBENCH_PROCESS_ID`` environment variables); each cell
  worker calls ``jax.distributed.initialize`` first, and ``jax.devices()`` then lists the
  devices of every process. CPU processes talk through gloo collectives.

Sharded backends build their mesh with `mesh_1d`, place host data with `put_global`
(works when the mesh spans processes) and read results with `fetch`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

import numpy as np

from harness.api import InputError

DEVICES = "SCANBENCH_DEVICES"
COORDINATOR = "SCANBENCH_COORDINATOR"
NUM_PROCESSES = "SCANBENCH_NUM_PROCESSES"
PROCESS_ID = "SCANBENCH_PROCESS_ID"
_HOST_COUNT = re.compile(r"--xla_force_host_platform_device_count=\S*")


def environ_for(
    devices: int | None, base: Mapping[str, str], distributed: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a cell worker that should see ``devices`` devices (None: as is),
    joined to a multi-process run when ``distributed`` holds the three SCANBENCH_ settings."""
    env = dict(base)
    if devices is not None:
        flags = _HOST_COUNT.sub("", env.get("XLA_FLAGS", "")).strip()
        env["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={devices}".strip()
        env[DEVICES] = str(devices)
    env.update(distributed or {})
    return env


def distributed_settings(
    coordinator: str | None, num_processes: int | None, process_id: int | None
) -> dict[str, str]:
    """Validated multi-process settings (all three or none) as worker environment."""
    given = {COORDINATOR: coordinator, NUM_PROCESSES: num_processes, PROCESS_ID: process_id}
    if all(value is None for value in given.values()):
        return {}
    if any(value is None for value in given.values()):
        raise InputError(
            "a multi-process run needs all of --coordinator HOST:PORT, --num-processes K "
            "and --process-id I"
        )
    if not 0 <= process_id < num_processes:
        raise InputError(f"--process-id must be in [0, {num_processes}), got {process_id}")
    if ":" not in coordinator:
        raise InputError(f"--coordinator must be HOST:PORT, got {coordinator!r}")
    return {key: str(value) for key, value in given.items()}


def initialize_distributed() -> bool:
    """Join the multi-process run described by the environment, if any (before any other
    jax use in the process). Returns whether it did."""
    if COORDINATOR not in os.environ:
        return False
    import jax

    jax.distributed.initialize(
        coordinator_address=os.environ[COORDINATOR],
        num_processes=int(os.environ[NUM_PROCESSES]),
        process_id=int(os.environ[PROCESS_ID]),
    )
    return True


def cell_devices() -> list:
    """The devices this cell may use: the first ``SCANBENCH_DEVICES`` of ``jax.devices()``
    (all processes' devices in a multi-process run), or all of them."""
    import jax

    devices = jax.devices()
    wanted = os.environ.get(DEVICES)
    if wanted is None:
        return devices
    if int(wanted) > len(devices):
        raise InputError(
            f"--devices {wanted}: only {len(devices)} {devices[0].platform} device(s) visible"
        )
    return devices[: int(wanted)]


def cell_device_info() -> dict[str, int]:
    """How many devices the cell may use, and how many processes the run has."""
    import jax

    return {"cell_devices": len(cell_devices()), "processes": jax.process_count()}


def mesh_1d(axis: str):
    """A 1-D `jax.sharding.Mesh` over `cell_devices`, its one axis named ``axis``."""
    from jax.sharding import Mesh

    return Mesh(np.array(cell_devices()), (axis,))


def padded_size(count: int, devices: int) -> int:
    """``count`` rounded up to a multiple of ``devices``."""
    return -(-count // devices) * devices


def put_global(host_array: np.ndarray, sharding):
    """A global jax.Array with ``sharding`` from a host array every process holds whole."""
    import jax

    host_array = np.asarray(host_array)
    return jax.make_array_from_callback(host_array.shape, sharding, lambda index: host_array[index])


def fetch(array) -> np.ndarray:
    """The whole value of a (possibly multi-process) jax.Array on this host."""
    if getattr(array, "is_fully_addressable", True) or array.is_fully_replicated:
        return np.asarray(array)
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(array, tiled=True))

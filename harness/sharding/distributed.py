"""Process plumbing for several devices and hosts: the environment a cell's worker gets,
and joining a multi-process run.

- ``scanbench run --devices N``: the runner gives each cell's worker N devices: on CPU,
  ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` (virtual devices sharing the
  host's cores; set before jax starts, so only in a fresh worker); on every platform
  ``SCANBENCH_DEVICES=N``, which `scanbench.sharding.placement.cell_devices` honours.
- Several hosts: every host runs the same `scanbench run` with ``--coordinator HOST:PORT
  --num-processes K --process-id I`` (or the ``SCANBENCH_COORDINATOR``,
  ``SCANBENCH_NUM_PROCESSES``, ``SCANBENCH_PROCESS_ID`` environment variables); each cell
  worker calls ``jax.distributed.initialize`` first, and ``jax.devices()`` then lists the
  devices of every process. CPU processes talk through gloo collectives.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from ..api import InputError
from .placement import DEVICES, cell_devices

COORDINATOR = "SCANBENCH_COORDINATOR"
NUM_PROCESSES = "SCANBENCH_NUM_PROCESSES"
PROCESS_ID = "SCANBENCH_PROCESS_ID"
_HOST_COUNT = re.compile(r"--xla_force_host_platform_device_count=\S*")


def environ_for(
    devices: int | None,
    base: Mapping[str, str],
    distributed: Mapping[str, str] | None = None,
    per_core: bool = False,
) -> dict[str, str]:
    """The environment of a cell worker that should see ``devices`` devices (None: as is),
    joined to a multi-process run when ``distributed`` holds the three SCANBENCH_ settings.

    ``per_core`` (a sharded backend given no device count): one virtual XLA:CPU device per
    core, unless ``XLA_FLAGS`` already sets a count. It changes only the CPU platform: on
    a GPU host the backend still sees every GPU."""
    env = dict(base)
    if devices is not None:
        flags = _HOST_COUNT.sub("", env.get("XLA_FLAGS", "")).strip()
        env["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={devices}".strip()
        env[DEVICES] = str(devices)
    elif per_core and not _HOST_COUNT.search(env.get("XLA_FLAGS", "")):
        count = usable_cores()
        flags = env.get("XLA_FLAGS", "")
        env["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={count}".strip()
    env.update(distributed or {})
    return env


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity), else the machine's count."""
    count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return count or os.cpu_count() or 1


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


def cell_device_info() -> dict[str, int]:
    """How many devices the cell may use, and how many processes the run has."""
    import jax

    return {"cell_devices": len(cell_devices()), "processes": jax.process_count()}

"""Devices, meshes and placement for the backends of the `sharded` strategy.

A cell may use the first ``SCANBENCH_DEVICES`` of ``jax.devices()`` (`cell_devices`; the
runner sets it for ``scanbench run --devices N``, see `scanbench.sharding.distributed`);
sharded backends build their mesh with `mesh_1d`, place host data with `put_global`
(works when the mesh spans processes) and read results with `fetch`.
"""

from __future__ import annotations

import os

import numpy as np

from ..api import InputError

DEVICES = "SCANBENCH_DEVICES"


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

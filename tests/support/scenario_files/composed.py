"""Backends of known composition, for checking the time decomposition.

Each returns its input plus ``DISPATCHES`` (integer-valued floats: exact in any order),
spending its time in one known way:

- ``host-and-device``: ``HOST_S`` of Python busy loop, then one jitted computation whose
  time the test measures on its own (a serial loop over 2048 values: asynchronous, see
  the toy scenario's ``jax-async``);
- ``transfer``: one ``jax.device_put`` of a 64 MiB NumPy array (the sum is made in the
  untimed prepare), nothing else;
- ``dispatch``: ``DISPATCHES`` queued calls of a trivial jitted function (``x + 1``, the
  function `scanbench.probes.overheads.dispatch_costs` times), one wait.
"""

from __future__ import annotations

import time

import numpy as np

from scanbench import Backend, MismatchError, Scenario, Size, Strategy

HOST_S = 0.04
DISPATCHES = 2000
LOOP_STEPS = 5000


def make_inputs(size, seed, dtype):
    return np.round(100 * np.random.default_rng(seed).normal(size=size["n"])).astype(dtype)


def check(output, expected, dtype):
    error = float(np.max(np.abs(np.asarray(output) - expected)))
    if error > 1e-6:
        raise MismatchError("composed output differs", error, 1e-6)
    return error


def device_work():
    """The jitted computation of ``host-and-device``: x, after ~35 ms of serial work."""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def work(x):
        y = jax.lax.fori_loop(0, LOOP_STEPS, lambda i, y: jnp.sin(y) + 0.5, jnp.ones(2048))
        return x + DISPATCHES + 0.0 * y[0].astype(x.dtype)

    return work


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _backend(name, strategy, place, run, size):
    """A JAX backend: ``place`` the inputs (untimed), then ``run``, at one size only."""
    return Backend(
        name=name,
        strategy=strategy,
        engine="jax",
        prepare=lambda inputs, _size: place(inputs),
        run=run,
        sizes=frozenset({size}),
    )


def _host_and_device():
    import jax

    work = device_work()

    def run(x):
        spin(HOST_S)
        return work(x)

    return _backend("host-and-device", Strategy.VMAPPED, jax.device_put, run, "smoke")


def _transfer():
    import jax

    return _backend(
        "transfer",
        Strategy.SEQUENTIAL,
        lambda inputs: inputs + DISPATCHES,
        jax.device_put,
        "default",
    )


def _dispatch():
    import jax

    step = jax.jit(lambda x: x + 1)

    def run(x):
        for _ in range(DISPATCHES):
            x = step(x)
        return x

    return _backend("dispatch", Strategy.SEQUENTIAL, jax.device_put, run, "smoke")


SCENARIO = Scenario(
    name="composed",
    description="backends of known composition (host, device, transfer, dispatch)",
    sizes={
        "smoke": Size("smoke", {"n": 4}),
        "default": Size("default", {"n": 16 * 2**20}),  # 64 MiB of float32
    },
    make_inputs=make_inputs,
    reference=lambda inputs: inputs + DISPATCHES,
    check=check,
    work=lambda size, dtype: {"elements": float(size["n"])},
    backends={
        "host-and-device": _host_and_device(),
        "transfer": _transfer(),
        "dispatch": _dispatch(),
    },
    throughput_unit="elements",
)

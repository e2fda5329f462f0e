"""A tiny scenario for runner and CLI tests, with deliberately broken backends.

It is written against the public API only, as a user's own scenario file would be.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from scanbench import Backend, MismatchError, Scenario, Size, Strategy


def make_inputs(size, seed, dtype):
    return np.random.default_rng(seed).normal(size=size["n"]).astype(dtype)


def reference(inputs):
    return 2.0 * inputs


def check(output, expected, dtype):
    error = float(np.max(np.abs(np.asarray(output) - expected)))
    if error > 1e-6:
        raise MismatchError("toy output differs", error, 1e-6)
    return error


def _backend(name, run, **kwargs):
    return Backend(
        name=name,
        strategy=Strategy.SEQUENTIAL,
        engine="numpy",
        prepare=lambda inputs, size: inputs,
        run=run,
        **kwargs,
    )


def _crash(x):
    os._exit(3)


def _segfault(x):
    import signal

    print("about to crash", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGSEGV)


def _hang(x):
    time.sleep(600)


DELAY_S = 0.05  # the `delayed` backend's result is ready this long after `run` returns


class Delayed:
    """A result that becomes ready only ``DELAY_S`` after ``run`` returned, as a JAX
    array from an asynchronous dispatch does: ``block_until_ready()`` waits for it."""

    def __init__(self, value):
        self.value, self.ready_at = value, time.perf_counter() + DELAY_S

    def block_until_ready(self):
        time.sleep(max(0.0, self.ready_at - time.perf_counter()))
        return self

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.value, dtype=dtype)


def _jax_async():
    """A raw jitted call (no factory, no wait): returns a future of ~20 ms of work, a
    serial recurrence (one core: XLA's intra-op threads would make its time bimodal).

    XLA:CPU runs an executable inline (``run`` returns only when it is done) when the
    cost analysis of its entry computation, which counts a loop body once, is under
    1000 flops; a 64-wide carry was 83 flops, so the loop carries 2048 values (2067
    flops) to make ``run`` return a real future (0.2 ms to return, 20 ms to be ready)."""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def double_slowly(x):
        y = jax.lax.fori_loop(0, 3_000, lambda i, y: jnp.sin(y) + 0.5, jnp.ones(2048, x.dtype))
        return 2.0 * x + 0.0 * y[0]

    return Backend(
        name="jax-async",
        strategy=Strategy.VMAPPED,
        engine="jax",
        prepare=lambda inputs, size: jax.device_put(inputs),
        run=double_slowly,
    )


def _in_place(x):
    x *= 2.0  # modifies its input: right once, wrong on every later call
    return x.copy()


def _wrong_after_first_call():
    calls = []

    def run(x):
        calls.append(1)
        return 2.0 * x + (len(calls) > 1)

    return run


SCENARIO = Scenario(
    name="toy",
    description="doubling a vector",
    sizes={
        "smoke": Size("smoke", {"n": 8}),
        "default": Size("default", {"n": 1000}),
        "large": Size("large", {"n": 1_000_000}),  # ~1 ms per call: above timer noise
    },
    make_inputs=make_inputs,
    reference=reference,
    check=check,
    work=lambda size, dtype: {"elements": float(size["n"])},
    backends={
        "good": _backend("good", lambda x: 2.0 * x),
        "wrong": _backend("wrong", lambda x: 2.0 * x + 1.0),
        "wrong-later": _backend("wrong-later", _wrong_after_first_call()),
        "nan": _backend("nan", lambda x: np.full_like(x, np.nan)),
        "in-place": _backend("in-place", _in_place),
        "delayed": _backend("delayed", lambda x: Delayed(2.0 * x)),
        "jax-async": _jax_async(),
        "crash": _backend("crash", _crash),
        "hang": _backend("hang", _hang),
        "segfault": _backend("segfault", _segfault),
        "default-only": _backend(
            "default-only", lambda x: 2.0 * x, sizes=frozenset({"default"}), skip_reason="slow"
        ),
    },
    throughput_unit="elements",
)

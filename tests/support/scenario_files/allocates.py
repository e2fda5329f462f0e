"""A scenario whose backends allocate known amounts: the memory probe's known answers.

Written against the public API only, as a user's scenario file would be.
"""

from __future__ import annotations

import numpy as np

from scanbench import MismatchError, Scenario, Size, Strategy, host_backend, jax_backend

TEMPORARY_BYTES = 64 * 2**20  # what `numpy-temporary` allocates (and touches) per call


def make_inputs(size, seed, dtype):
    return np.random.default_rng(seed).standard_normal(size["n"]).astype(dtype)


def reference(inputs):
    return 2.0 * inputs


def check(output, expected, dtype):
    error = float(np.max(np.abs(np.asarray(output) - expected)))
    if error > 1e-9:
        raise MismatchError("allocates output differs", error, 1e-9)
    return error


def _with_temporary(x):
    scratch = np.ones(TEMPORARY_BYTES // 8)  # written: every page resident
    out = 2.0 * x
    out += scratch[: x.size]  # in place: no other temporary
    out -= 1.0
    return out


def _doubled_cumsum_minus(x):
    import jax.numpy as jnp

    return 2.0 * x + (jnp.cumsum(x) - jnp.cumsum(x))  # a temporary XLA must plan for


SCENARIO = Scenario(
    name="allocates",
    description="doubling, with and without known temporaries",
    sizes={
        "smoke": Size("smoke", {"n": 2_000_000}),
        "default": Size("default", {"n": 4_000_000}),
    },
    make_inputs=make_inputs,
    reference=reference,
    check=check,
    work=lambda size, dtype: {"elements": float(size["n"])},
    backends={
        "numpy-output-only": host_backend(
            "numpy-output-only", Strategy.VMAPPED, "numpy", lambda x: 2.0 * x
        ),
        "numpy-temporary": host_backend(
            "numpy-temporary", Strategy.VMAPPED, "numpy", _with_temporary
        ),
        "jax-cumsum": jax_backend("jax-cumsum", Strategy.VMAPPED, _doubled_cumsum_minus),
    },
    throughput_unit="elements",
    dtypes=("float64",),
)

"""A scenario whose work repeats along ``steps`` (``count_along``), with one costly
backend (a known sleep per step) that may be measured on part of the work and scaled.

Written against the public API only, as a user's scenario file would be.
"""

from __future__ import annotations

import time

import numpy as np

from scanbench import Backend, MismatchError, Scenario, Size, Strategy

STEP_S = 0.02  # the `sleepy` backend sleeps this long per step
COMPILE_S = 0.3  # the `compiles-first` backend's first call sleeps this long (a compile)


def make_inputs(size, seed, dtype):
    return np.arange(size["steps"], dtype=dtype)


def reference(inputs):
    return 2.0 * inputs


def check(output, expected, dtype):
    error = float(np.max(np.abs(np.asarray(output) - expected)))
    if error > 1e-9:
        raise MismatchError("steps output differs", error, 1e-9)
    return error


def _sleepy(x):
    out = np.empty_like(x)
    for index, value in enumerate(x):
        time.sleep(STEP_S)
        out[index] = 2.0 * value
    return out


def _sleepy_jax(x):
    """One jitted call per step, then a stack and a sum: dispatches = steps + 2 (a fixed
    part that scaling a reduced call would multiply)."""
    import jax
    import jax.numpy as jnp

    double, total = jax.jit(lambda v: 2.0 * v), jax.jit(jnp.sum)
    out = []
    for value in x:
        time.sleep(STEP_S)
        out.append(double(value))
    stacked = jnp.stack(out)
    total(stacked).block_until_ready()
    return np.asarray(stacked)


def _compiles_first(prepared):
    """Slow on its first call only (a path compiled on first use), then quick."""
    x, calls = prepared
    if not calls:
        time.sleep(COMPILE_S)
    calls.append(1)
    return 2.0 * x


def _backend(name, run, prepare=lambda inputs, size: inputs, **kwargs):
    return Backend(
        name=name,
        strategy=Strategy.SEQUENTIAL,
        engine="numpy",
        prepare=prepare,
        run=run,
        reducible_to=2,
        **kwargs,
    )


SCENARIO = Scenario(
    name="steps",
    description="doubling, one step at a time",
    sizes={
        "smoke": Size("smoke", {"steps": 10}),
        "default": Size("default", {"steps": 2}),
        "four": Size("four", {"steps": 4}),  # too few steps for the linear count model
    },
    make_inputs=make_inputs,
    reference=reference,
    check=check,
    work=lambda size, dtype: {"steps": float(size["steps"])},
    backends={
        "sleepy": _backend("sleepy", _sleepy),
        "quick": _backend("quick", lambda x: 2.0 * x),
        "sleepy-jax": _backend("sleepy-jax", _sleepy_jax),
        "compiles-first": _backend(
            "compiles-first", _compiles_first, prepare=lambda inputs, size: (inputs, [])
        ),
    },
    throughput_unit="steps",
    dtypes=("float64",),
    count_along="steps",
)

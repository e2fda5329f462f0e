"""A tiny scenario for runner and CLI tests, with deliberately broken backends.

It is written against the public API only, as a user's own scenario file would be.
"""

from __future__ import annotations

import os
import time

import numpy as np

from harness.api import Backend, MismatchError, Scenario, Size, Strategy


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


def _hang(x):
    time.sleep(600)


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
        "crash": _backend("crash", _crash),
        "hang": _backend("hang", _hang),
        "default-only": _backend(
            "default-only", lambda x: 2.0 * x, sizes=frozenset({"default"}), skip_reason="slow"
        ),
    },
    throughput_unit="elements",
)

"""Two backends for the overlap of two workers (`harness.overlap`): ``compiling`` spends a
known amount of CPU time in ``prepare`` (a compile) and ``timed`` a known amount in each
call. CPU time, not sleep: a stopped worker's CPU clock stops with it, so a prepare that
was paused takes longer by the pause, which the worker must leave out.

Written against the public API only, as a user's scenario file would be.
"""

from __future__ import annotations

import time

import numpy as np

from harness.api import Backend, MismatchError, Scenario, Size, Strategy

COMPILE_CPU_S = 3.0  # `compiling`: CPU seconds of its prepare
TIMED_PREPARE_CPU_S = 0.5  # `timed`: CPU seconds of its prepare (it samples after that)
CALL_CPU_S = 0.01  # `timed`: CPU seconds per call


def busy(seconds: float) -> None:
    """Spin until this thread has used ``seconds`` of CPU time."""
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass


def _prepare_for(seconds):
    def prepare(inputs, size):
        busy(seconds)
        return inputs

    return prepare


def _timed_run(x):
    busy(CALL_CPU_S)
    return 2.0 * x


def check(output, expected, dtype):
    error = float(np.max(np.abs(np.asarray(output) - expected)))
    if error > 1e-9:
        raise MismatchError("output differs", error, 1e-9)
    return error


def _backend(name, prepare_cpu_s, run):
    return Backend(
        name=name,
        strategy=Strategy.SEQUENTIAL,
        engine="numpy",
        prepare=_prepare_for(prepare_cpu_s),
        run=run,
    )


SCENARIO = Scenario(
    name="overlapping",
    description="a long prepare beside a timed backend",
    sizes={"smoke": Size("smoke", {"n": 4}), "default": Size("default", {"n": 4})},
    make_inputs=lambda size, seed, dtype: np.arange(size["n"], dtype=dtype),
    reference=lambda inputs: 2.0 * inputs,
    check=check,
    work=lambda size, dtype: {"items": float(size["n"])},
    backends={
        "compiling": _backend("compiling", COMPILE_CPU_S, lambda x: 2.0 * x),
        "timed": _backend("timed", TIMED_PREPARE_CPU_S, _timed_run),
    },
    throughput_unit="items",
    dtypes=("float64",),
)

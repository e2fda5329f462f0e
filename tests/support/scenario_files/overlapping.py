"""Two backends for the overlap of two workers (`scanbench.execution.overlap`): ``compiling``
spends a known amount of CPU time in ``prepare`` (a compile) and ``timed`` a known amount in each
call. CPU time, not sleep: a stopped worker's CPU clock stops with it, so a prepare that
was paused takes longer by the pause, which the worker must leave out.

Written against the public API only, as a user's scenario file would be.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import time

import numpy as np

from scanbench import Backend, MismatchError, Scenario, Size, Strategy

COMPILE_CPU_S = 3.0  # `compiling`: CPU seconds of its prepare
TIMED_PREPARE_CPU_S = 0.5  # `timed`: CPU seconds of its prepare (it samples after that)
CALL_CPU_S = 0.01  # `timed`: CPU seconds per call
COMPILING_TASK = "sb-compiling"  # `compiling`'s worker names its thread so (Linux)


def busy(seconds: float) -> None:
    """Spin until this thread has used ``seconds`` of CPU time."""
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass


def _name_this_thread(name: str) -> None:
    """Set the name /proc shows for this thread (prctl PR_SET_NAME), so that another
    process's load samples can tell it apart; nothing where there is no prctl."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _prepare_for(seconds, task_name=None):
    def prepare(inputs, size):
        if task_name:
            _name_this_thread(task_name)
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


def _backend(name, prepare_cpu_s, run, task_name=None):
    return Backend(
        name=name,
        strategy=Strategy.SEQUENTIAL,
        engine="numpy",
        prepare=_prepare_for(prepare_cpu_s, task_name),
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
        "compiling": _backend("compiling", COMPILE_CPU_S, lambda x: 2.0 * x, COMPILING_TASK),
        "timed": _backend("timed", TIMED_PREPARE_CPU_S, _timed_run),
    },
    throughput_unit="items",
    dtypes=("float64",),
)

"""One call's host time by function (`scanbench.probes.host_calls`), on calls of known
composition: a library call that sleeps a known time, own functions around it, a
library that calls further into itself, and code above the backend's own."""

from __future__ import annotations

import functools
import textwrap
import time

import numba
import numpy as np

from scanbench.probes.host_calls import event_cost, profile_call
from scanbench.timing import call_and_wait

SLEEP_S = 0.03


def _own(filename: str, module: str) -> bool:
    return filename == __file__


def _inner() -> None:
    time.sleep(SLEEP_S)


def _outer() -> str:
    _inner()
    return textwrap.fill("word " * 2000, width=40)  # a pure-Python library: many calls


def _by_name(profiled):
    return {f.name: f for f in profiled.functions}


def test_a_library_call_is_charged_its_whole_time_and_own_code_its_own():
    profiled = profile_call(_outer, own=_own)
    functions = _by_name(profiled)
    sleep = functions["time.sleep"]
    assert not sleep.own and sleep.calls == 1 and sleep.seconds >= SLEEP_S
    assert profiled.functions[0].name == "time.sleep"  # the largest first
    fill = functions["textwrap.fill"]
    assert not fill.own and fill.calls == 1 and fill.events > 100  # its calls inside it
    assert not any(name.startswith("textwrap.TextWrapper") for name in functions)
    own = [f for f in profiled.functions if f.own]
    assert {f.name.split(":")[-1] for f in own} == {"_outer", "_inner"}
    assert all(f.seconds < SLEEP_S / 2 for f in own)  # exclusive: the sleep is not theirs
    assert profiled.wall_s >= profiled.profiled_s >= SLEEP_S


def _run(prepared) -> str:
    return _outer()


def test_code_above_the_backends_own_is_charged_to_no_function():
    """The engine calls the backend (`call_and_wait`, as the counting pass does): the
    engine's frames are no function of the profile; the backend's calls are."""
    profiled = profile_call(functools.partial(call_and_wait, _run, None), own=_own)
    names = {f.name for f in profiled.functions}
    assert not any("call_and_wait" in name for name in names), names
    assert {"time.sleep", "textwrap.fill"} <= names
    assert any(name.endswith(":_run") for name in names)
    alone = profile_call(functools.partial(time.sleep, SLEEP_S), own=_own)
    assert alone.functions == () and alone.profiled_s == 0.0  # nothing of its own


@numba.njit(cache=False)
def _kernel(values):
    total = 0.0
    for index in range(values.size):
        total += np.sqrt(values[index])
    return total


def _calls_the_kernel(values) -> float:
    return _kernel(values)


def test_a_numba_kernel_is_charged_to_its_own_function():
    values = np.ones(1_000_000)
    _kernel(values)  # compiled
    profiled = profile_call(functools.partial(_calls_the_kernel, values), own=_own)
    names = [f.name for f in profiled.functions]
    assert any(name.endswith(":_kernel") for name in names), names


def test_the_hooks_cost_per_event_is_measured_small_and_positive():
    own_s, library_s = event_cost(calls=5_000)
    assert 0.0 <= own_s < 20e-6 and 0.0 <= library_s < 20e-6
    assert profile_call(_inner, own=_own, event_s=(own_s, library_s)).event_s == own_s

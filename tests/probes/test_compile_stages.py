"""The time to a first result by JAX's stages (`scanbench.probes.compilations`): JAX's
own trace, lowering and compile events, each less the pauses inside it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from scanbench.probes.compilations import compile_events, stages_of


def test_each_stage_is_its_events_less_the_pauses_inside_them_and_the_rest_is_the_rest():
    events = [
        ("trace", 0.2, "jit(f)", 10.2),
        ("lower", 0.1, "jit(f)", 10.3),
        ("compile", 1.0, "jit(f)", 11.3),  # paused 0.4 s of it: from 10.5 to 10.9
        ("compile", 0.5, "jit(g)", 12.0),
    ]

    def paused(start: float, end: float) -> float:
        return max(0.0, min(end, 10.9) - max(start, 10.5))

    found = stages_of(events, total_s=2.0, paused=paused)
    assert found.trace_s == pytest.approx(0.2) and found.lower_s == pytest.approx(0.1)
    assert found.compile_s == pytest.approx(0.6 + 0.5) and found.compiles == 2
    assert found.rest_s == pytest.approx(2.0 - 1.4)
    # a phase shorter than its events says (clocks apart): the rest is none, not negative
    assert stages_of(events, total_s=1.0).rest_s == 0.0


def test_a_cold_jit_reports_each_stage_and_a_warm_one_none():
    xs = jnp.arange(16.0)
    f = jax.jit(lambda v: jnp.cumsum(v * 2.0))
    jax.clear_caches()
    with compile_events() as cold:
        f(xs).block_until_ready()
    with compile_events() as warm:
        f(xs).block_until_ready()
    kinds = {kind for kind, *_ in cold}
    assert kinds == {"trace", "lower", "compile"}, cold
    assert warm == []

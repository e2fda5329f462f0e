"""Trace and static-HLO counts on tiny programs whose counts are known exactly."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from scanbench.probes.hlo import estimate
from scanbench.probes.trace import TraceEvent, count_events, flatten, recording, trace_calls

HOST = "/host:CPU"


def ev(name, start, duration, line="python3", plane=HOST, **stats):
    return TraceEvent(plane, line, name, float(start), float(duration), stats)


EXECUTE = "CommonPjRtLoadedExecutable::ExecuteHelperOnSingleDevice"


def test_synthetic_nested_pjit_counts_once_per_launch():
    events = [
        ev("PjitFunction(f)", 0, 100),
        ev("PjitFunction(f)", 1, 98),  # the nested fast-path/fallback pair
        ev(EXECUTE, 10, 50),
        ev("CommonPjRtLoadedExecutable::ExecutePrepare", 11, 5),  # a phase, not a launch
        ev("PjitFunction(g)", 200, 100),
        ev("PjitFunction(g)", 201, 98),
        ev(EXECUTE, 210, 50),
        ev("PjitFunction(cached)", 400, 10),  # no execution inside: not a launch
        ev(EXECUTE, 500, 20),  # outside any PjitFunction: an AOT/eager launch
        ev("fusion.1", 505, 5, line="tf_XLAEigen/1", hlo_op="fusion.1", hlo_module="jit_h"),
        ev("end: fusion.1", 510, 1, line="tf_XLAEigen/1"),
        ev("while.3", 20, 30, line="tf_XLAEigen/1", hlo_op="while.3", hlo_module="jit_f"),
        ev("add", 21, 2, line="tf_XLAEigen/1", hlo_op="add", hlo_module="jit_f"),
        ev("add", 25, 2, line="tf_XLAEigen/2", hlo_op="add", hlo_module="jit_f"),
        ev("DevicePut", 600, 3),
        ev("add", 21, 2, plane="/device:GPU:0", hlo_op="add", hlo_module="jit_f"),
    ]
    counts = count_events(events)
    assert counts.executions == 3
    assert counts.dispatches == 3
    assert counts.dispatches_by_function == {"f": 1, "g": 1, "jit_h": 1}
    assert counts.kernels == 3  # fusion.1 + 2 x add; no end: marker, no while container
    assert counts.kernels_by_op == {"jit_f/add": 2, "jit_h/fusion.1": 1}
    assert counts.device_puts == 1


def test_flatten_reads_what_counting_needs_from_a_profile():
    """A `ProfileData`-shaped object: host end markers dropped, host HLO events keep only
    ``hlo_op``/``hlo_module`` (read no further), other host events no stats, device
    planes every stat."""
    from types import SimpleNamespace as NS

    def stats_of(*pairs):
        def stats():  # the last pair is never reached once the two are found
            for key, value in pairs:
                if key == "unreadable":
                    raise AssertionError("read past hlo_op and hlo_module")
                yield key, value

        return stats()

    def event(name, start, duration, *pairs):
        return NS(name=name, start_ns=start, duration_ns=duration, stats=stats_of(*pairs))

    kernel = event(
        "fusion.1", 5, 2, ("hlo_op", "fusion.1"), ("hlo_module", "jit_f"), ("unreadable", 0)
    )
    host_lines = [
        NS(name="python3", events=[event("PjitFunction(f)", 0, 10, ("python", 1))]),
        NS(name="tf_XLAEigen/1", events=[kernel, event("end: fusion.1", 7, 1)]),
    ]
    gpu = NS(
        name="/device:GPU:0",
        lines=[
            NS(
                name="stream",
                events=[
                    event("fusion.1", 5, 2, ("hlo_op", "fusion.1"), ("memcpy_details", "size:8")),
                ],
            )
        ],
    )
    events = flatten(NS(planes=[NS(name=HOST, lines=host_lines), gpu]))
    assert events == [
        ev("PjitFunction(f)", 0, 10),
        ev("fusion.1", 5, 2, line="tf_XLAEigen/1", hlo_op="fusion.1", hlo_module="jit_f"),
        ev("fusion.1", 5, 2, "stream", "/device:GPU:0", hlo_op="fusion.1", memcpy_details="size:8"),
    ]


def test_synthetic_sharded_launch_counts_executions_per_device():
    launch = "CommonPjRtLoadedExecutable::Execute (jit_f)"
    events = [
        ev(launch, 0, 500),  # the host-side launch over all devices
        # worker line A runs device 1, then device 0; line B runs device 2
        ev(f"[1] {launch}", 10, 5, line="A"),
        ev("add", 20, 2, line="A", hlo_op="add", hlo_module="jit_f"),
        ev("mul", 30, 2, line="A", hlo_op="mul", hlo_module="jit_f"),
        ev(f"[0] {launch}", 40, 5, line="A"),
        ev("add", 50, 2, line="A", hlo_op="add", hlo_module="jit_f"),
        ev(f"[2] {launch}", 12, 5, line="B"),
        ev("add", 25, 2, line="B", hlo_op="add", hlo_module="jit_f"),
        ev("end: add", 27, 1, line="B"),
    ]
    counts = count_events(events)
    assert counts.executions == 1 and counts.dispatches == 1
    assert counts.executions_by_device == {"0": 1, "1": 1, "2": 1}
    assert counts.kernels == 4


def test_jitted_function_called_ten_times_is_ten_dispatches():
    f = jax.jit(lambda x: jnp.sin(x) * 2.0 + 1.0)
    x = jnp.ones(1000, jnp.float32)
    jax.block_until_ready(f(x))
    with recording() as events:
        y = x
        for _ in range(10):
            y = f(y)
        jax.block_until_ready(y)
    counts = count_events(events)
    assert counts.dispatches == 10
    assert counts.executions == 10
    assert list(counts.dispatches_by_function) == ["<lambda>"]
    assert counts.kernels == 10  # one fusion per call
    assert counts.device_puts == 0


def _scan_program(carry: int, steps: int):
    def body(c, _):
        return jnp.sin(c) * 1.0001 + jnp.cos(c), None

    x = jnp.ones(carry, jnp.float32)
    compiled = jax.jit(lambda x: lax.scan(body, x, None, length=steps)[0]).lower(x).compile()
    jax.block_until_ready(compiled(x))
    return compiled, x


def test_scan_over_large_carry_is_one_dispatch_and_trip_count_times_body_kernels():
    compiled, x = _scan_program(100_000, 100)
    static = estimate(compiled.as_text())
    (loop,) = static.loops
    assert loop.trip_count == 100 and not loop.cpu_native
    assert loop.body_kernels >= 1
    counts, _ = trace_calls(compiled, x)
    assert counts.dispatches == 1
    body_ops = [op for op in counts.kernels_by_op if counts.kernels_by_op[op] == 100]
    assert len(body_ops) == loop.body_kernels  # each body kernel ran exactly 100 times
    assert counts.kernels == static.kernels == static.launch_equivalent
    assert 0 <= static.kernels - 100 * loop.body_kernels < 10  # a few ops outside the loop


def test_small_loop_runs_as_one_native_kernel_on_cpu_and_static_agrees():
    compiled, x = _scan_program(16, 1000)
    static = estimate(compiled.as_text())
    counts, _ = trace_calls(compiled, x)
    assert counts.kernels == static.kernels
    (loop,) = static.loops
    assert static.launch_equivalent >= 1000 * loop.body_kernels  # what a GPU would launch
    if loop.cpu_native:  # XLA:CPU compiled the whole loop into one kernel
        assert static.kernels < 10 and counts.kernels < 10


@pytest.mark.parametrize("scenario_backend_name", ["scanned-time-major", "scanned-issue"])
def test_static_estimate_matches_trace_for_tdma_scans(scenario_backend_name):
    from scanbench.scenarios.tridiagonal import SCENARIO
    from tests.conftest import scenario_case

    _, size, inputs, _ = scenario_case("tridiagonal", "float32")
    backend = SCENARIO.backend(scenario_backend_name)
    prepared = backend.prepare(inputs, size)
    jax.block_until_ready(backend.run(prepared))
    counts, _ = trace_calls(backend.run, prepared)
    ((compiled, calls),) = backend.executables(prepared).values()
    static = estimate(compiled.as_text())
    assert calls == 1 and counts.dispatches == 1
    assert counts.kernels == static.kernels
    assert [loop.trip_count for loop in static.loops] == [100, 100]
    if scenario_backend_name == "scanned-issue":
        assert static.transposes_outside_loops >= 1  # the issue transposes inside jit


def test_sequential_tdma_dispatches_two_per_column():
    from scanbench.scenarios.tridiagonal import SCENARIO
    from tests.conftest import scenario_case

    _, size, inputs, _ = scenario_case("tridiagonal", "float32")
    backend = SCENARIO.backend("sequential-jax")
    prepared = backend.prepare(inputs, size)
    jax.block_until_ready(backend.run(prepared))
    counts, _ = trace_calls(backend.run, prepared)
    assert counts.dispatches_by_function["jit(_forward_column)"] == 100
    assert counts.dispatches_by_function["jit(_backward_column)"] == 100


def test_numpy_argument_is_a_device_put_per_call():
    f = jax.jit(lambda x: x * 2.0)
    host = np.ones(1000, np.float32)
    jax.block_until_ready(f(host))
    with recording() as events:
        for _ in range(5):
            jax.block_until_ready(f(host))
    counts = count_events(events)
    assert counts.device_puts == 5 and counts.dispatches == 5


def test_recording_keeps_the_trace_when_asked(tmp_path):
    f = jax.jit(lambda x: x + 1)
    with recording(str(tmp_path)):
        jax.block_until_ready(f(jnp.zeros(3)))
    assert list(tmp_path.rglob("*.xplane.pb"))

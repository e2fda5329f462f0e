"""Every kind of device-to-host conversion is counted on CPU, where it is zero-copy and
neither the transfer guard nor the profiler sees most of them (`scanbench.probes.conversions`)."""

from __future__ import annotations

import io

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import scanbench
from scanbench.probes.conversions import count_conversions, counting

Y = jnp.arange(4.0) + 1


def _np_array():
    return [np.array(Y + i) for i in range(5)]  # the seed's own pattern, reduced


KINDS = [
    ("np.array", _np_array, 5),
    ("np.asarray", lambda: np.asarray(Y), 1),
    ("np.asanyarray", lambda: np.asanyarray(Y), 1),
    ("np.ascontiguousarray", lambda: np.ascontiguousarray(Y), 1),
    ("__array__", lambda: Y.__array__(), 1),
    ("float", lambda: [float((Y + i)[0]) for i in range(5)], 5),
    ("int", lambda: int(Y[1]), 1),
    ("bool", lambda: bool(Y[0] > 0), 1),
    ("complex", lambda: complex(Y[0]), 1),
    ("index", lambda: [0, 1, 2][jnp.int32(1)], 1),
    (".item()", lambda: Y[0].item(), 1),
    (".tolist()", lambda: Y.tolist(), 1),
    ("jax.device_get", lambda: jax.device_get({"a": Y, "b": Y}), 1),
    ("str/print", lambda: print(Y, file=io.StringIO()), 1),
    ("format", lambda: f"{Y[0]:.2f}", 1),
    ("repr", lambda: repr(Y), 1),
]


@pytest.mark.parametrize(("kind", "call", "count"), KINDS, ids=[kind for kind, _, _ in KINDS])
def test_each_kind_of_conversion_is_counted_once(kind, call, count):
    call()  # compile what it dispatches; the conversions are the same every time
    counted = count_conversions(call)
    assert counted.total == count
    assert counted.by_kind == {kind: count}
    assert set(counted.by_function) == {f"{__name__}.{call.__name__}"} or call.__name__ == (
        "<lambda>"
    )


def test_host_values_and_device_work_are_not_conversions():
    host = np.arange(3.0)
    counted = count_conversions(lambda: (np.array(host), float(host[0]), Y * 2, jnp.sum(Y)))
    assert counted.total == 0


def test_conversions_are_named_by_the_function_that_made_them():
    def evaluate(candidate):
        return float(candidate[0])

    def tune():
        return [evaluate(Y + i) for i in range(3)] + [np.array(Y)]

    counted = count_conversions(tune)
    assert counted.by_function == {f"{__name__}.evaluate": 3, f"{__name__}.tune": 1}


def test_waits_are_counted_told_pending_or_ready_and_timed():
    """A wait on a matrix product still being computed sleeps; a wait on a value already
    computed (or run inline, under XLA:CPU's small-executable threshold) does not."""
    product = jax.jit(lambda a: (a @ a @ a).sum())
    a = jnp.ones((1000, 1000))
    jax.block_until_ready(product(a))  # compiled

    def pending():
        return jax.block_until_ready(product(a))

    counted = count_conversions(pending)
    assert (counted.waits, counted.pending_waits, counted.total) == (1, 1, 0)
    alone = min(_seconds(pending) for _ in range(3))
    assert counted.waited_s > 0.5 * alone  # it slept through most of the product

    ready = jax.block_until_ready(product(a))
    counted = count_conversions(lambda: [jax.block_until_ready(ready) for _ in range(10)])
    assert (counted.waits, counted.pending_waits) == (10, 0)
    assert counted.waited_s < alone


def test_a_wait_on_work_in_progress_is_not_idle_time_in_the_trace():
    """The code's own waits are annotated in the trace; a wait that sleeps through a
    matrix product overlaps the device's work, and only its wake-up is idle."""
    from scanbench.probes.spans import measure_spans
    from scanbench.probes.trace import recording

    product = jax.jit(lambda a: (a @ a @ a).sum())
    a = jnp.ones((1000, 1000))
    jax.block_until_ready(product(a))  # compiled

    with recording() as events, counting() as made:
        jax.block_until_ready(product(a))
    spans = measure_spans(events, wall_s=1.0)
    assert len(made.waited_s) == 1 and spans.wait_s > 0.5 * made.waited_s[0]
    assert spans.wait_idle_s < 0.5 * spans.wait_s, spans


def _seconds(call) -> float:
    import time

    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def test_everything_is_put_back_after_counting():
    before = (np.array, np.asarray, type(Y).__float__, jax.device_get)
    count_conversions(lambda: float(Y[0]))
    assert (np.array, np.asarray, type(Y).__float__, jax.device_get) == before


def test_a_profile_counts_np_array_per_item_on_cpu():
    """The issue's reduced case: `[np.array(y + i) for i in range(5)]` counted 0 before."""

    def per_item(y):
        return [np.array(y + i) for i in range(5)]

    quick = scanbench.TimingConfig(warmup=0, min_time_s=0.0, min_count=1, max_time_s=0.05)
    result = scanbench.profile(per_item, Y, strategy="sequential", timing=quick)
    assert result.counts["host_conversions"] == 5
    conversions = result.record.counts.conversions
    assert conversions["by_kind"] == {"np.array": 5}
    assert conversions["by_function"] == {f"{__name__}.per_item": 5}
    assert any("host syncs on a GPU" in finding.text() for finding in result.diagnosis)

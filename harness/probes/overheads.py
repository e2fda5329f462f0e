"""Unit costs on the current device, measured in the same run as the cells.

- **dispatch**: one call of a trivial jitted function on a tiny array, *queued* (many calls,
  one wait: the host cost of a launch) and *blocking* (wait after each call: the round trip);
- **kernel launch**: the time per iteration of a ``lax.scan`` whose body is one trivial
  elementwise op, divided by the body's kernels per iteration (static HLO count). The
  carry is the smallest of 16..65536 elements for which XLA:CPU keeps the loop as
  per-iteration kernels (smaller loops become one native kernel, detected in the HLO);
- **transfer**, by the path a transfer takes (the transfer probe tells two apart: a
  ``device_put``-like transfer logs its shape, an argument of a jitted call does not):
  - explicit ``device_put`` (also ``jnp.asarray``, a Python scalar in an eager op): latency
    (4 bytes) and bandwidth (64 MiB);
  - argument of a jitted call, each kind measured as the extra time of a queued call with
    it over the same call with a device argument: a Python scalar, a NumPy scalar, a small
    NumPy array (the log does not say which: the decomposition prices these as a range);
  - device to host (``np.asarray``/``float()``): of a ready value (latency and bandwidth; on
    CPU a zero-copy view) and of a pending one (the extra time over waiting for it).

- **wait**: what a wait after each small asynchronous call adds per call (the host can
  no longer queue ahead while the device works, and sleeps until woken);
- **profiler**: what recording one trace event adds to the traced program (a scan of
  per-iteration kernels traced against untraced), for taking it out of device-busy time.

Each cost is the median over repeated measurements. These feed the decomposition
(``scanbench.decomposition``), which says how much of a cell's time those counts explain.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .hlo import estimate
from .trace import HOST_PLANE, recording

SCAN_CARRIES = (16, 64, 256, 1024, 4096, 65536)
SCAN_STEPS = 1000


def _median_time(fn: Callable[[], Any], repeats: int) -> float:
    """Median seconds of ``fn()``. As in the timing loop, a result is freed after the
    clock stopped (freeing a large array is slow: timed, it made ``device_put`` look
    slower than the same put timed in a cell)."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - start)
        del result
    return float(np.median(samples))


def dispatch_costs(calls: int = 2000, repeats: int = 7) -> dict[str, float]:
    step = jax.jit(lambda x: x + 1)
    x = jnp.zeros(4, jnp.float32)
    jax.block_until_ready(step(x))

    def queued():
        y = x
        for _ in range(calls):
            y = step(y)
        jax.block_until_ready(y)

    def blocking():
        y = x
        for _ in range(calls // 4):
            y = jax.block_until_ready(step(y))

    return {
        "dispatch_queued_s": _median_time(queued, repeats) / calls,
        "dispatch_blocking_s": _median_time(blocking, repeats) / (calls // 4),
    }


def launch_cost(repeats: int = 7) -> dict[str, float]:
    def scan(x, steps):
        return lax.scan(lambda c, _: (c * 0.5 + 1.0, None), x, None, length=steps)[0]

    for carry in SCAN_CARRIES:
        x = jnp.zeros(carry, jnp.float32)
        long = jax.jit(lambda x: scan(x, SCAN_STEPS)).lower(x).compile()
        loops = estimate(long.as_text()).loops
        if loops and not loops[0].cpu_native:
            break
    short = jax.jit(lambda x: scan(x, 1)).lower(x).compile()
    jax.block_until_ready(long(x))
    jax.block_until_ready(short(x))
    per_iteration = (
        _median_time(lambda: jax.block_until_ready(long(x)), repeats)
        - _median_time(lambda: jax.block_until_ready(short(x)), repeats)
    ) / (SCAN_STEPS - 1)
    body_kernels = loops[0].body_kernels if loops else 0
    native = bool(loops and loops[0].cpu_native)
    result = {
        "scan_carry_elements": float(carry),
        "scan_iteration_s": per_iteration,
        "scan_body_kernels": float(body_kernels),
        "scan_loop_native": float(native),
    }
    if body_kernels and not native:
        result["kernel_launch_s"] = per_iteration / body_kernels
    return result


def transfer_costs(repeats: int = 7) -> dict[str, float]:
    small = np.zeros(1, np.float32)
    large = np.ones(64 * 2**20 // 4, np.float32)

    def put(array):
        return lambda: jax.block_until_ready(jax.device_put(array))  # returned: freed untimed

    h2d_latency = _median_time(put(small), repeats * 10)
    h2d_large = _median_time(put(large), repeats)
    on_device_small = jax.device_put(small)
    on_device_large = jax.device_put(large)
    d2h_latency = _median_time(lambda: np.array(on_device_small), repeats * 10)
    d2h_large = _median_time(lambda: np.array(on_device_large), repeats)
    return {
        "h2d_latency_s": h2d_latency,
        "h2d_bytes_per_s": large.nbytes / max(h2d_large - h2d_latency, 1e-9),
        "d2h_latency_s": d2h_latency,
        "d2h_bytes_per_s": large.nbytes / max(d2h_large - d2h_latency, 1e-9),
    }


def argument_costs(calls: int = 2000, repeats: int = 7) -> dict[str, float]:
    """Extra host time per argument of a jitted call, by kind, over a device argument."""
    step = jax.jit(lambda x, s: x + s)
    x = jnp.zeros(4, jnp.float32)
    kinds = {
        "device": jnp.ones(4, jnp.float32),
        "python_scalar": 1.0,
        "numpy_scalar": np.float32(1.0),
        "numpy_array": np.ones(4, np.float32),
    }
    for argument in kinds.values():
        jax.block_until_ready(step(x, argument))

    def queued(argument):
        def calls_with_it():
            y = x
            for _ in range(calls):
                y = step(y, argument)
            jax.block_until_ready(y)

        return _median_time(calls_with_it, repeats) / calls

    per_call = {kind: queued(argument) for kind, argument in kinds.items()}
    return {
        f"arg_{kind}_s": max(per_call[kind] - per_call["device"], 0.0)
        for kind in kinds
        if kind != "device"
    }


def pending_conversion_cost(repeats: int = 21) -> dict[str, float]:
    """Extra time of ``np.asarray`` on a value still being computed, over waiting for it.

    The computation is over 1000 flops so that XLA:CPU runs it asynchronously (cheaper
    ones run inline and are never pending).
    """
    work = jax.jit(lambda x: jnp.cumsum(jnp.sin(x)))
    x = jnp.ones(2**16, jnp.float32)
    jax.block_until_ready(work(x))
    waited = _median_time(lambda: jax.block_until_ready(work(x)), repeats)
    converted = _median_time(lambda: np.asarray(work(x)), repeats)
    return {"d2h_pending_s": max(converted - waited, 0.0)}


def wait_cost(calls: int = 100, repeats: int = 7) -> dict[str, float]:
    """What a wait after each call adds to a chain of small asynchronous calls: (time with
    ``block_until_ready`` after every call - time queued, then one wait) / calls.

    Waiting stops the host from queueing the next call while the device runs the last
    (their times add up instead of overlapping) and puts the host thread to sleep until
    the device wakes it: what a loop with ``float(loss)`` or ``block_until_ready`` per
    step pays per step. The calls are over 1000 flops (XLA:CPU runs cheaper ones inline,
    where there is nothing to wait for) and small (tens of microseconds), where a wait
    costs most relative to the work."""
    work = jax.jit(lambda x: jnp.cumsum(jnp.sin(x)))
    x = jnp.ones(2**12, jnp.float32)
    jax.block_until_ready(work(x))

    def queued():
        outputs = [work(x) for _ in range(calls)]
        jax.block_until_ready(outputs)

    def waited():
        for _ in range(calls):
            jax.block_until_ready(work(x))

    queued_s = _median_time(queued, repeats)
    waited_s = _median_time(waited, repeats)
    return {"wait_s": max(waited_s - queued_s, 0.0) / calls}


def profiler_event_cost(sessions: int = 5, around: int = 3) -> dict[str, float]:
    """What recording one trace event costs the traced program: a scan of 2000 steps of
    per-iteration kernels (~10,000 events) traced against untraced, per recorded event
    (events counted as `scanbench.probes.trace.flatten` keeps them, as the spans do).

    Measured as the counting pass records a cell: one call in a fresh profiler session.
    Later calls of a session cost more (its buffers grow), so a mean over several calls of
    one session overstated the cost of a cell's single traced call. Each of ``sessions``
    sessions compares its call with the median of the ``around`` untraced calls before
    and after it; the cost is the median over sessions, one session's value being noisy
    (performance log, 2026-11-23, "The profiler's cost per event")."""
    x = jnp.zeros(SCAN_CARRIES[-1], jnp.float32)  # large enough for per-iteration kernels
    scan = jax.jit(
        lambda x: lax.scan(lambda c, _: (c * 0.5 + 1.0, None), x, None, length=2 * SCAN_STEPS)[0]
    )
    jax.block_until_ready(scan(x))

    def one_call() -> float:
        return _median_time(lambda: jax.block_until_ready(scan(x)), 1)

    per_event = []
    for _ in range(sessions):
        untraced = [one_call() for _ in range(around)]
        with recording() as events:
            traced = one_call()
        untraced += [one_call() for _ in range(around)]
        recorded = sum(1 for event in events if event.plane == HOST_PLANE)
        if recorded:
            per_event.append(max(traced - float(np.median(untraced)), 0.0) / recorded)
    return {"profiler_event_s": float(np.median(per_event)) if per_event else 0.0}


def measure_all() -> dict[str, Any]:
    """Every unit cost on the default device (a few seconds)."""
    return {
        "platform": jax.devices()[0].platform,
        **dispatch_costs(),
        **launch_cost(),
        **transfer_costs(),
        **argument_costs(),
        **pending_conversion_cost(),
        **wait_cost(),
        **profiler_event_cost(),
    }

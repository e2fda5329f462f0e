"""The time decomposition recovers the parts of backends of known composition.

`tests/support/scenario_files/composed.py`: a backend that spends a known time in a Python busy
loop before a device computation, one that only transfers (a 64 MiB ``device_put`` per
call) and one that only dispatches (2000 trivial jitted calls). Each is decomposed as the
runner decomposes a cell (the timed median, the counting pass with its trace, unit costs
from `scanbench.probes.overheads`), and each known part must come out within 10% of its
known share of the median.

On this shared VM the same 64 MiB ``device_put`` takes 54-73 ms from one second to the
next and a cell's median moves 1.5x between spells, so unit costs and a median measured
seconds apart do not describe the same machine. As the project compares only what was
measured together: each of ``ROUNDS`` rounds counts the cell (its traced call), then
times one call between two measurements of the unit costs (their mean prices the round,
all within ~0.1 s: the spells last about a second), and decomposes that call; a part is
checked on the median over rounds of (measured fraction / known fraction). A
systematically wrong part (a transfer priced at the wrong path: 10-30x; a device time that
keeps the profiler's cost or counts the dispatches' inline kernels) fails every round.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import numpy as np
import pytest

from scanbench.counts import Counts
from scanbench.decomposition import PARTS, decompose
from scanbench.probes.overheads import (
    argument_costs,
    dispatch_costs,
    launch_cost,
    profiler_event_cost,
    transfer_costs,
)
from scanbench.probes.passes import count_cell
from scanbench.timing import call_and_wait, time_call
from tests.support.paths import SCENARIO_FILES

COMPOSED = str(SCENARIO_FILES / "composed.py")
_spec = importlib.util.spec_from_file_location("composed_for_decomposition", COMPOSED)
composed = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(composed)
ROUNDS = 15
pytestmark = pytest.mark.solo  # on a loaded machine (the other xdist worker) no share holds


def decomposed(backend_name: str, size_name: str) -> list[dict]:
    """The decomposition of one cell in each round (see the module doc)."""
    scenario = composed.SCENARIO
    size = scenario.size(size_name)
    backend = scenario.backend(backend_name)
    prepared = backend.prepare(scenario.make_inputs(size, 0, "float32"), size)
    call_and_wait(backend.run, prepared)  # compiled, off the clock
    fixed = {"platform": "cpu", **launch_cost(), **argument_costs(), **profiler_event_cost()}
    event_ns = fixed["profiler_event_s"] * 1e9

    def varying() -> dict[str, float]:  # the costs these backends are priced with
        return {**dispatch_costs(repeats=1), **transfer_costs(repeats=1)}

    rounds = []
    for _ in range(ROUNDS):
        counts = count_cell(backend, prepared, "cpu")  # the traced call, then at once
        before = varying()  # one timed call between two measurements of the costs
        seconds = time_call(backend.run, prepared)[1]
        after = varying()
        costs = {**fixed, **{key: (before[key] + after[key]) / 2 for key in before}}
        spans = counts.get("spans") or {}
        rounds.append(
            {
                **decompose(seconds, Counts.from_json(counts), costs),
                "median_s": seconds,
                # for the failure message: what priced the device share
                "traced_ms": round(spans.get("wall_s", 0) * 1e3, 2),
                "busy_ms": round(spans.get("device_busy_s", 0) * 1e3, 2),
                "busy_events": spans.get("busy_events"),
                "event_ns": event_ns,
            }
        )
    return rounds


def recovered(backend: str, size: str, known: dict[str, Callable[[float], float]]) -> dict:
    """The median decomposition over the rounds; each known part within 10%: the median
    over rounds of (measured fraction / the known fraction of that round's median)."""
    rounds = decomposed(backend, size)
    for part, value in known.items():
        ratios = [r[f"{part}_fraction"] / value(r["median_s"]) for r in rounds]
        traced = [(r["traced_ms"], r["busy_ms"], r["busy_events"]) for r in rounds]
        assert float(np.median(ratios)) == pytest.approx(1.0, abs=0.1), (
            f"{backend}: {part} measured / known per round {np.round(ratios, 3).tolist()}; "
            f"medians {[round(r['median_s'] * 1e3, 2) for r in rounds]} ms; traced call, busy "
            f"ms and busy events {traced}"
            f"; profiler cost per event {rounds[0]['event_ns']:.0f} ns"
        )
    middle = {
        key: float(np.median([r[key] for r in rounds]))
        for key in rounds[0]
        if key.endswith("_fraction") and rounds[0][key] is not None
    }
    return {**middle, "rounds": rounds}


@pytest.mark.solo  # recovers measured shares: the other xdist worker's load skews them
def test_host_python_and_device_time_are_told_apart():
    """Known: HOST_S of busy loop (wall clock), the rest is the device computation (its
    dispatch is ~10 us)."""
    parts = recovered(
        "host-and-device",
        "smoke",
        {"host": lambda median: composed.HOST_S / median,
         "device": lambda median: 1 - composed.HOST_S / median},
    )  # fmt: skip
    assert all(r["device_measured"] for r in parts["rounds"])
    assert sum(parts[f"{p}_fraction"] for p in PARTS) == pytest.approx(1.0, abs=0.05)


def test_a_transfer_bound_backend_is_all_transfer():
    parts = recovered("transfer", "default", {"transfer": lambda median: 1.0})
    assert parts["transfer_low_fraction"] == parts["transfer_high_fraction"]  # path known
    assert parts["device_fraction"] == 0.0


@pytest.mark.solo  # recovers measured shares: the other xdist worker's load skews them
def test_a_dispatch_bound_backend_is_all_dispatch():
    """2000 dispatches of a trivial function run inline on the calling thread: their
    kernels are part of the dispatch cost, not device time counted twice."""
    parts = recovered("dispatch", "smoke", {"dispatch": lambda median: 1.0})
    assert parts["device_fraction"] == 0.0 and parts["transfer_fraction"] == 0.0


def test_the_sync_share_is_the_device_idle_time_inside_the_waits():
    """A wait costs the time the device sat idle inside it (the trace's ``wait_idle_s``);
    records without it: the time inside the waits, capped by the device-idle share (an
    upper bound); older still: the probe's price of a wait."""
    from scanbench.decomposition import sync_seconds

    costs = {"wait_s": 30e-6}
    measured = {"waits": 200, "pending_waits": 150, "waited_s": 1.6e-3}
    spans = {"wall_s": 2e-3, "wait_s": 1.6e-3, "wait_idle_s": 0.4e-3}
    assert sync_seconds(2e-3, measured, spans, 1.0, costs) == (pytest.approx(0.4e-3), False)
    # the traced call ran 2x slower than the timed ones: the share is what carries over
    slow = {**spans, "wall_s": 4e-3}
    assert sync_seconds(2e-3, measured, slow, 1.0, costs) == (pytest.approx(0.2e-3), False)
    # stored before the idle part was measured: 80% inside waits, but the device was busy
    # 70% of the call, so the waits cost at most the other 30%
    older = {"wall_s": 2e-3}
    assert sync_seconds(2e-3, measured, older, 1.0, costs, device_s=1.4e-3) == (
        pytest.approx(0.6e-3),
        True,
    )
    oldest = {"waits": 200}  # before the waits were timed: the probe's price
    assert sync_seconds(2e-3, oldest, older, 0.5, costs) == (pytest.approx(3e-3), False)
    assert sync_seconds(2e-3, {"waits": 0, "waited_s": 0.0}, spans, 1.0, costs) == (0.0, False)


def test_a_decomposition_from_a_traced_call_far_from_the_median_is_unreliable():
    from scanbench.counts import Counts
    from scanbench.decomposition import TRACED_MAX

    costs = {"dispatch_queued_s": 3e-6, "h2d_latency_s": 2e-5, "h2d_bytes_per_s": 1e9}
    counts = {
        "trace": {"dispatches": 1, "kernels": 11},
        "transfers": {"h2d": 0, "h2d_bytes": 0},
        "spans": {"wall_s": 1.0e-3, "device_busy_s": 0.5e-3, "events": 30, "busy_events": 14},
    }
    fast = decompose(1.0e-3 / (TRACED_MAX + 4), Counts.from_json(counts), costs)
    assert not fast["reliable"] and "the traced call took 6.0x the median" in fast["unreliable"]
    close = decompose(0.9e-3, Counts.from_json(counts), costs)
    assert close["reliable"] and close["unreliable"] == ""
    # 400 dispatches x 1 us beside a device busy 95% of the call: 135% of the median
    busy = {**counts["spans"], "device_busy_s": 0.95e-3, "events": 0, "busy_events": 0}
    summed = {**counts, "spans": busy, "trace": {"dispatches": 400, "kernels": 0}}
    over = decompose(1.0e-3, Counts.from_json(summed), {**costs, "dispatch_queued_s": 1e-6})
    assert not over["reliable"] and "the parts add up to 135% of the median" in over["unreliable"]

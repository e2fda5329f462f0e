"""Why a faster neighbour is faster (`scanbench.gap`): measured differences, priced.

Synthetic facts of known composition: every difference's seconds follow from the counts
and unit costs given here, so the shares are known exactly.
"""

from __future__ import annotations

import dataclasses

import pytest

from scanbench.diagnosis import Cores, Cost, Facts, Neighbour, diagnose, summary
from scanbench.gap import explain

COSTS = {"dispatch_queued_s": 10e-6, "kernel_launch_s": 50e-9}
RATES = {"fault_s": 2e-6, "fault_kind": "base page", "numpy_call_s": 1e-6}


def _facts(median, *, dispatch_s=0.0, transfer_s=0.0, launch_s=0.0, **per_call) -> Facts:
    return Facts(
        median_s=median,
        per_call={"dispatches": 1, "kernels": 3, **per_call},
        decomposition={
            "dispatch_s": dispatch_s,
            "transfer_s": transfer_s,
            "launch_s": launch_s,
            "sync_s": 0.0,
            "compile_s": 0.0,
            "dispatch_fraction": dispatch_s / median,
            "transfer_fraction": transfer_s / median,
            "transfer_low_fraction": transfer_s / median,
            "transfer_high_fraction": transfer_s / median,
            "device_fraction": 0.1,
            "host_fraction": 0.0,
            "reliable": True,
        },
        costs=COSTS,
        rates=RATES,
        cores=Cores(1.0, True),
    )


def test_the_gap_is_shared_out_by_priced_differences_largest_first():
    loop = _facts(10e-3, dispatch_s=6e-3, transfer_s=1e-3, dispatches=600, h2d=100)
    batched = _facts(2e-3, dispatch_s=10e-6)
    gap = explain(loop, batched, differ=0.5)
    assert gap.seconds == pytest.approx(8e-3)
    first, second = gap.differences
    assert first.mechanism == "dispatches" and first.located
    assert first.share == pytest.approx((6e-3 - 10e-6) / 8e-3)
    assert second.mechanism == "transfers" and second.share == pytest.approx(1e-3 / 8e-3)
    assert "600 vs 1 dispatches per call x 10.0 us" in first.text
    assert gap.explained == pytest.approx(first.share + second.share)


def test_shares_never_sum_past_the_whole_gap():
    mine = _facts(3e-3, dispatch_s=2.5e-3, transfer_s=2e-3, dispatches=250, h2d=20)
    gap = explain(mine, _facts(1e-3), differ=0.5)
    assert [d.mechanism for d in gap.differences] == ["dispatches"]  # it takes the whole gap
    assert sum(d.share for d in gap.differences) <= 1.0
    assert gap.differences[0].share == 1.0


def test_faults_are_priced_only_at_a_base_pages_price_and_over_the_cells_cores():
    mine = dataclasses.replace(
        _facts(10e-3),
        faults_per_call=2000,
        cores=Cores(2.0, True),
        memory={"output_bytes": 8e6, "temp_bytes": 1e6, "temporaries": []},
    )
    fresh = explain(mine, _facts(5e-3), differ=0.5).largest
    assert fresh.mechanism == "fresh memory"
    assert fresh.seconds == pytest.approx(2000 * 2e-6 / 2.0)  # two cores fault at once
    assert "output" in fresh.text and fresh.fix.startswith("allocate the output once")
    mixed = dataclasses.replace(mine, rates={**RATES, "fault_kind": None})
    assert explain(mixed, _facts(5e-3), differ=0.5).largest is None  # no price of that kind


def test_the_fix_follows_where_the_fresh_pages_come_from():
    copies = dataclasses.replace(
        _facts(10e-3),
        faults_per_call=1000,
        memory={
            "output_bytes": 1e6,
            "temp_bytes": 2.4e8,
            "temporaries": [
                {"instruction": "copy.12", "opcode": "copy", "bytes": 1.2e8},
                {"instruction": "bitcast_copy_fusion", "opcode": "fusion", "bytes": 1.2e8},
            ],
        },
    )
    fresh = explain(copies, _facts(5e-3), differ=0.5).largest
    assert "XLA's copies" in fresh.text and fresh.fix.startswith("avoid the copies")


def test_a_neighbour_on_more_cores_accounts_for_the_core_time():
    mine = _facts(10e-3)
    wide = dataclasses.replace(_facts(5e-3), cores=Cores(2.0, True))
    gap = explain(mine, wide, differ=0.5)
    assert gap.largest.mechanism == "cores"
    assert gap.largest.seconds == pytest.approx(10e-3 * (1 - 1.0 / 2.0))
    assert gap.explained == pytest.approx(1.0)


def _neighbour_of(mine: Facts, theirs: Facts, name: str = "vmap") -> Neighbour:
    ratio = mine.median_s / theirs.median_s
    return Neighbour(name, ratio, ratio * 0.95, ratio * 1.05, gap=explain(mine, theirs, 0.5))


def test_a_located_cause_that_explains_the_gap_leads_and_the_neighbour_backs_it():
    loop = _facts(10e-3, dispatch_s=7e-3, dispatches=700)
    batched = _facts(2e-3)
    facts = dataclasses.replace(loop, faster=(_neighbour_of(loop, batched),))
    lead = diagnose(facts)[0]
    assert lead.cost == Cost.DISPATCH
    assert "vmap does the same work 5.00x faster in this run" in lead.evidence
    assert lead.neighbour is not None and lead.neighbour.name == "vmap"
    assert all(f.cost != Cost.FASTER for f in diagnose(facts))  # said once, in the lead


def test_a_neighbour_lead_names_the_largest_difference_and_what_is_left():
    mine = _facts(10e-3, launch_s=3e-3, kernels=60_000)
    theirs = _facts(5e-3)
    facts = dataclasses.replace(mine, faster=(_neighbour_of(mine, theirs, "blocked"),))
    lead = diagnose(facts)[0]
    assert lead.cost == Cost.FASTER
    text = summary(diagnose(facts))
    assert "60,000 vs 3 kernels per call" in text and "(60%)" in text
    assert "for the other 40% of the gap no measured difference accounts" in text
    assert "see what blocked does differently" in text


def test_no_difference_says_so_and_hands_the_whole_gap_back():
    mine, theirs = _facts(10e-3), _facts(5e-3)
    facts = dataclasses.replace(mine, faster=(_neighbour_of(mine, theirs, "x"),))
    text = summary(diagnose(facts))
    assert "no measured difference accounts for the 5 ms gap per call" in text
    assert text.endswith("see what x does differently") or "see what x does" in text


def test_generated_code_is_not_called_a_python_loop():
    kernel = dataclasses.replace(
        _facts(10e-3),
        engine="numba",
        per_call={"dispatches": 0, "kernels": 0},
        python={"hottest": [{"where": "<string>:1", "count": 500, "code": ""}]},
    )
    assert all(f.cost != Cost.HOST_LOOP for f in diagnose(kernel))
    assert "Python loop" not in summary(diagnose(kernel))


def _with_host(facts: Facts, host_s: float | None, reliable: bool = True) -> Facts:
    return dataclasses.replace(
        facts,
        decomposition={**facts.decomposition, "host_s": host_s, "reliable": reliable},
    )


def _mechanisms(mine: Facts, theirs: Facts) -> list[str]:
    return [d.mechanism for d in explain(mine, theirs, differ=0.5).differences]


def test_host_code_between_device_calls_is_the_traced_idle_time_above_the_neighbours():
    """A Python loop around jitted calls: the trace's device-idle time beyond the priced
    dispatches is host code between the calls; against one jitted program it is the gap's
    largest part and its fix moves the loop into the program."""
    loop = _with_host(_facts(10e-3, dispatch_s=1e-3, dispatches=64), 6e-3)
    scanned = _with_host(_facts(1e-3), 0.1e-3)
    largest = explain(loop, scanned, differ=0.5).largest
    assert largest.mechanism == "host between calls"
    assert largest.seconds == pytest.approx(5.9e-3)
    assert largest.share == pytest.approx(5.9e-3 / 9e-3)
    assert "64 device calls" in largest.text and "6 ms vs 100 us per call" in largest.text
    assert "lax.scan" in largest.fix
    # the neighbour's traced call not reliable: its whole median as the bound (a floor)
    bounded = explain(loop, _with_host(scanned, 0.1e-3, reliable=False), differ=0.5).largest
    assert bounded.seconds == pytest.approx(5e-3) and "vs at most 1 ms" in bounded.text
    # never for a host engine (its host time is its work), nor one device call per call
    numba = dataclasses.replace(loop, engine="numba")
    assert "host between calls" not in _mechanisms(numba, scanned)
    single = _with_host(_facts(10e-3), 6e-3)
    assert "host between calls" not in _mechanisms(single, scanned)
    # nor from a traced call that does not describe the median
    unsure = _with_host(loop, 6e-3, reliable=False)
    assert "host between calls" not in _mechanisms(unsure, scanned)


def _profiled(*functions) -> dict:
    """A stored host profile whose call took 10 ms: (name, own, seconds, calls)."""
    return {
        "wall_s": 10e-3,
        "functions": [
            {"name": name, "own": own, "seconds": seconds, "calls": calls, "events": 1}
            for name, own, seconds, calls in functions
        ],
    }


def test_a_host_engines_calls_into_a_library_are_priced_from_its_profile():
    """Host code (Numba + a Python optimizer): its profiled time in each library, scaled
    to the median, against one compiled program that calls none on the host."""
    profile = _profiled(
        ("cma.evolution_strategy.CMAEvolutionStrategy.tell", False, 6e-3, 2),
        ("numba_lanes.py:evaluate", True, 3e-3, 2),
        ("jax._src.random.core.fold_in", False, 1e-3, 4),
    )
    numba = dataclasses.replace(_facts(20e-3, dispatches=0), engine="numba", host_calls=profile)
    scanned = _facts(2e-3)
    gap = explain(numba, scanned, differ=0.5)
    first, second = gap.differences
    assert first.mechanism == "host calls into cma"
    assert first.seconds == pytest.approx(12e-3)  # 60% of the profiled call x 20 ms
    assert "CMAEvolutionStrategy.tell x2" in first.text and "cma's work" in first.fix
    # JAX's eager calls from host code are the dispatches they are (a located cause),
    # their profiled time less the dispatch the decomposition prices already
    each = numba.costs["dispatch_queued_s"]
    assert second.mechanism == "dispatches" and second.located
    assert second.seconds == pytest.approx(2e-3 - 4 * each)
    assert "fold_in x4" in second.text and "jit the JAX calls" in second.fix
    assert "its own code, profiled" in gap.where and "numba_lanes.py:evaluate" in gap.where
    # a neighbour that is host code too, not profiled: what it spends there is not known
    other = dataclasses.replace(scanned, engine="numpy")
    assert "host calls into cma" not in _mechanisms(numba, other)
    # ... and profiled: only the time above its own in the same library
    profiled_other = dataclasses.replace(
        other, host_calls=_profiled(("cma.x.CMAEvolutionStrategy.tell", False, 5e-3, 2))
    )
    cma = next(d for d in explain(numba, profiled_other, 0.5).differences if "cma" in d.mechanism)
    assert cma.seconds == pytest.approx(12e-3 - 1e-3)


def test_a_jax_loop_with_an_unreliable_trace_is_priced_by_its_other_libraries():
    """cma ask/tell on the host around jitted calls: with no reliable traced share, the
    profiled calls into cma are priced; JAX's own calls hold their programs' time."""
    profile = _profiled(
        ("cma.evolution_strategy.CMAEvolutionStrategy.tell", False, 5e-3, 2),
        ("jax._src.stages.Compiled.__call__", False, 4e-3, 2),
    )
    loop = _with_host(_facts(10e-3, dispatches=14), 6e-3, reliable=False)
    loop = dataclasses.replace(loop, host_calls=profile)
    assert _mechanisms(loop, _facts(1e-3)) == ["host calls into cma"]
    # with a reliable trace, the time between calls is priced whole, its functions named
    # (a compiled program's call is not host code)
    traced = dataclasses.replace(_with_host(loop, 6e-3), host_calls=profile)
    largest = explain(traced, _with_host(_facts(1e-3), 0.0), differ=0.5).largest
    assert largest.mechanism == "host between calls"
    assert "profiled, most in: cma CMAEvolutionStrategy.tell x2" in largest.text
    assert "Compiled" not in largest.text


def test_a_host_loop_is_priced_by_its_functions_profiled_time_beyond_the_neighbours_call():
    """SciPy's gtsv called once per system: the loop's own function (the f2py calls it
    makes report nothing to a profiler, so they are its time) less all the work the
    faster neighbour does; unprofiled, a minimal library call per iteration."""
    hottest = {"hottest": [{"where": "reference.py:33", "count": 1000, "code": "x = gtsv()"}]}
    loop = dataclasses.replace(
        _facts(6e-3, dispatches=0),
        engine="scipy",
        python=hottest,
        host_calls=_profiled(
            ("reference.py:gtsv_solve", True, 9e-3, 1),
            ("other.py:setup", True, 1e-3, 1),
        ),
    )
    blocked = _facts(0.5e-3)
    largest = explain(loop, blocked, differ=0.5).largest
    assert largest.mechanism == "host loop"
    assert largest.seconds == pytest.approx(0.9 * 6e-3 - 0.5e-3)  # its file's functions
    assert "1,000 iterations" in largest.text and "reference.py:gtsv_solve" in largest.text
    unprofiled = dataclasses.replace(loop, host_calls={})
    floor = explain(unprofiled, blocked, differ=0.5).largest
    assert floor.seconds == pytest.approx(1000 * 1e-6) and "(a floor)" in floor.text


def test_a_float_per_row_is_a_located_transfer_and_its_indexing_a_dispatch():
    """Issue 66: a user's Python loop with `float(c[-1])` per row, beside its vmapped
    twin: the profiled time in JAX's `__float__` joins the priced transfers, the eager
    `__getitem__` joins the priced dispatches, so the located causes explain the gap
    (before, "host calls into jax" took 66% and the located cause fell into "also")."""
    profile = _profiled(
        ("jax._src.array.ArrayImpl.__getitem__", False, 6e-3, 256),
        ("jax._src.array.ArrayImpl.__float__", False, 1e-3, 256),
        ("mine_fns.loop_float", True, 2e-3, 1),
    )
    loop = dataclasses.replace(
        _facts(10e-3, dispatch_s=2e-3, transfer_s=1e-3, dispatches=512, h2d=256),
        engine="python",
        host_calls=profile,
    )
    vmap = _facts(0.1e-3)
    gap = explain(loop, vmap, differ=0.5)
    by = {d.mechanism: d for d in gap.differences}
    assert "host calls into jax" not in by
    each = COSTS["dispatch_queued_s"]
    assert by["dispatches"].seconds == pytest.approx(2e-3 + 6e-3 - 256 * each)
    assert by["transfers"].seconds == pytest.approx(1e-3 + 1e-3)
    assert "__float__ x256" in by["transfers"].text and "__getitem__ x256" in by["dispatches"].text
    assert gap.largest.mechanism == "dispatches" and gap.largest.located


def test_fresh_memory_is_priced_by_the_kernel_time_measured_when_it_is_more():
    """vmapped TDMA at default (2026-12-06): 137,502 fresh-page faults per call, 236 ms of
    kernel CPU time per call on 1.7 cores, against a Numba kernel with none. The base-page
    price gives 62 ms; the kernel time measured (faulting, zeroing and unmapping) is the
    larger and is used, over the cores, with the floor said beside it."""
    vmapped = dataclasses.replace(
        _facts(0.264),
        faults_per_call=137_502,
        system_per_call=0.236,
        cores=Cores(1.7, True),
        rates={**RATES, "fault_s": 0.77e-6, "fault_kind": "base page"},
        memory={"output_bytes": 80e6, "temp_bytes": 483e6, "temporaries": []},
    )
    numba = dataclasses.replace(
        _facts(0.030, dispatches=0), engine="numba", faults_per_call=0.0, system_per_call=0.0
    )
    fresh = next(
        d for d in explain(vmapped, numba, 0.5).differences if d.mechanism == "fresh memory"
    )
    assert fresh.seconds == pytest.approx(0.236 / 1.7)
    assert "CPU time in the kernel 236 ms vs 0 us per call (measured)" in fresh.text
    assert "at least 62.3 ms of it at a base page's price" in fresh.text
    # a run that did not read the kernel time keeps the base-page floor
    unread = dataclasses.replace(vmapped, system_per_call=None)
    fresh = next(
        d for d in explain(unread, numba, 0.5).differences if d.mechanism == "fresh memory"
    )
    assert fresh.seconds == pytest.approx(137_502 * 0.77e-6 / 1.7)


def test_a_jax_programs_bytes_beyond_a_host_neighbours_whole_call_are_a_floor():
    """Against a Numba kernel (no cost analysis), XLA's accessed bytes at the bandwidth,
    less the neighbour's whole median: what it cannot have spent on the same bytes."""
    static = {"available": True, "bytes_accessed": 2.96e9}
    jax_cell = dataclasses.replace(_facts(0.264), static=static, bound_bytes_per_s=47.7e9)
    numba = dataclasses.replace(_facts(0.0298, dispatches=0), engine="numba")
    moved = next(
        d for d in explain(jax_cell, numba, 0.5).differences if d.mechanism == "bytes moved"
    )
    assert moved.seconds == pytest.approx(2.96e9 / 47.7e9 - 0.0298)
    assert "beyond the 29.8 ms of the neighbour's whole call (a floor)" in moved.text
    quick = dataclasses.replace(numba, median_s=0.1)  # its median covers the bytes: nothing
    assert "bytes moved" not in _mechanisms(jax_cell, quick)


def test_serial_chains_against_interleaved_ones_are_priced_at_the_measured_step():
    """numba-serial against numba-time-major: 1,000 sweeps of 100 dependent steps at 5 ns
    each is 0.5 ms that the interleaved neighbour overlaps, 62.5% of a 0.8 ms gap."""
    rates = {**RATES, "chain_step_s": {"float64": 5e-9}}
    work = {"chains": 1000.0, "chain_steps": 100_000.0}
    serial = dataclasses.replace(
        _facts(1.0e-3), rates=rates, work=work, dtype="float64", chains="serial"
    )
    interleaved = dataclasses.replace(_facts(0.2e-3), work=work, chains="interleaved")
    (chains,) = explain(serial, interleaved, differ=0.5).differences
    assert chains.mechanism == "dependent chains"
    assert chains.seconds == pytest.approx(0.5e-3) and chains.share == pytest.approx(0.625)
    assert "1,000 dependent chains of 100 steps" in chains.text
    assert "against chains interleaved (declared)" in chains.text
    assert chains.fix.startswith("interleave independent chains")
    # a serial neighbour (more cores: that difference is its cores'), or one that
    # declares nothing: no chain difference
    for other in ("serial", None):
        gap = explain(serial, dataclasses.replace(interleaved, chains=other), differ=0.5)
        assert "dependent chains" not in [d.mechanism for d in gap.differences]

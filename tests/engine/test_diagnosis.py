"""The diagnosis rules, each on synthetic numbers whose answer is known."""

from __future__ import annotations

import dataclasses

import pytest

import scanbench.diagnosis as diagnosis
from scanbench.diagnosis import (
    DOMINANT,
    GPU_LAUNCH_S,
    MOST,
    NEAR_LIMIT,
    Cores,
    Cost,
    Facts,
    Neighbour,
    diagnose,
    summary,
)
from scanbench.evidence import loop_of
from scanbench.findings import Difference, Gap
from tests.support.paths import DATA

COSTS = {"dispatch_queued_s": 11e-6, "kernel_launch_s": 40e-9}


def facts(**kwargs) -> Facts:
    base = {
        "median_s": 0.016,
        "per_call": {"dispatches": 1, "h2d": 0, "host_conversions": 0, "compiles": 0},
        "decomposition": {"device_fraction": 0.9, "host_fraction": 0.1},
        "costs": COSTS,
    }
    return Facts(**{**base, **kwargs})


def costs(findings) -> list[Cost]:
    return [finding.cost for finding in findings]


def test_a_dispatch_bound_loop_is_named_with_its_evidence_and_fix():
    per_call = {"dispatches": 594, "h2d": 0, "host_conversions": 0}
    (first, *_) = diagnose(facts(per_call=per_call, decomposition={"dispatch_fraction": 0.41}))
    assert first.cost == Cost.DISPATCH and first.share == 0.41
    assert "594 dispatches per call x 11.0 us = 41% of the time" in first.evidence
    assert "lax.scan or vmap" in first.fix


def test_many_small_executions_are_named_by_their_device_time_each():
    # the sequential MPPI loop at default: 15,422 dispatches, device 71% of 663 ms
    decomposition = {"dispatch_fraction": 0.08, "device_fraction": 0.71, "host_fraction": 0.19}
    loop = facts(median_s=0.663, per_call={"dispatches": 15422}, decomposition=decomposition)
    first = diagnose(loop)[0]
    assert first.cost == Cost.SMALL_EXECUTIONS and first.share == 0.71
    assert "15,422 dispatches per call, each running 31 us of device work" in first.evidence
    assert "vmap" in first.fix
    # the per-column TDMA loop at default: 202 dispatches of ~400 us each: not small
    columns = {"dispatch_fraction": 0.01, "device_fraction": 0.96, "host_fraction": 0.03}
    tdma = facts(median_s=0.0856, per_call={"dispatches": 202}, decomposition=columns)
    assert Cost.SMALL_EXECUTIONS not in costs(diagnose(tdma))


def test_transfers_are_priced_as_a_range_when_their_path_is_unknown():
    per_call = {"dispatches": 1, "h2d": 358, "host_conversions": 64}
    decomposition = {
        "transfer_fraction": 0.30,
        "transfer_low_fraction": 0.20,
        "transfer_high_fraction": 0.40,
    }
    (first, *_) = diagnose(facts(per_call=per_call, decomposition=decomposition))
    assert first.cost == Cost.TRANSFER and "358 host-to-device" in first.evidence
    assert "64 host conversions" in first.evidence and "20%-40% of the time" in first.evidence
    assert "np.array(x), float(x)" in first.fix


def test_recompiling_every_call_is_named():
    per_call = {"dispatches": 2674, "compiles": 80, "traces": 80}
    decomposition = {"compile_fraction": 0.95, "dispatch_fraction": 0.02}
    findings = diagnose(facts(per_call=per_call, decomposition=decomposition))
    assert costs(findings)[0] == Cost.RECOMPILE and "80 compilations" in findings[0].evidence
    assert "by stage" not in findings[0].evidence  # no durations stored: none said
    # the counted call's events by JAX's stages, where the probe stored their durations
    stages = {"trace_s": 0.012, "lower_s": 0.004, "compile_s": 0.080}
    (first, *_) = diagnose(
        facts(per_call=per_call, decomposition=decomposition, compilations=stages)
    )
    assert "(by stage: trace 12 ms, lower 4 ms, XLA compile 80 ms per call)" in first.evidence


def test_the_dominant_cost_is_the_largest_share_and_the_others_follow():
    per_call = {"dispatches": 7631, "h2d": 4618, "host_conversions": 1280}
    decomposition = {
        "dispatch_fraction": 0.25,
        "transfer_fraction": 0.35,
        "transfer_low_fraction": 0.35,
        "transfer_high_fraction": 0.35,
    }
    findings = diagnose(facts(per_call=per_call, decomposition=decomposition))
    assert costs(findings)[:2] == [Cost.TRANSFER, Cost.DISPATCH]
    # the conversions, priced as a GPU would pay them, are an estimate named after them
    assert summary(findings).endswith("(also: dispatch-bound, host syncs on a GPU)")


def test_below_the_dominant_share_the_cell_says_what_is_not_known():
    per_call = {"dispatches": 202}
    decomposition = {
        "dispatch_fraction": DOMINANT / 2,
        "device_fraction": 0.85,
        "host_fraction": 0.05,
    }
    # 202 dispatches of ~360 us of device work each (TDMA's column loop at default)
    findings = diagnose(facts(median_s=0.0856, per_call=per_call, decomposition=decomposition))
    assert costs(findings) == [Cost.UNKNOWN, Cost.DISPATCH]
    assert findings[0].evidence.startswith("no count explains the time (device 85%, host 5%)")
    assert "not measured: an operation count" in findings[0].evidence
    assert "scanbench profile" in findings[0].fix  # how to find out, never "the work itself"


def test_gpu_launches_are_a_labelled_prediction_on_a_cpu_run():
    launches = 12_000  # x 5 us = 60 ms: more than this 58 ms CPU median
    per_call = {"dispatches": 1, "launch_equivalent": launches}
    findings = diagnose(facts(per_call=per_call, median_s=0.058))
    gpu = next(f for f in findings if f.cost == Cost.GPU_LAUNCH)
    assert gpu.estimate and gpu.share is None and "(estimate)" in gpu.text()
    assert f"{launches:,} kernel launches per call on a GPU x 5 us" in gpu.evidence
    assert launches * GPU_LAUNCH_S > 0.058 * DOMINANT
    few = diagnose(facts(per_call={"launch_equivalent": 100}, median_s=0.058))
    assert Cost.GPU_LAUNCH not in costs(few)  # 0.5 ms of launches: not worth naming


def test_on_a_gpu_run_the_measured_launch_cost_makes_it_a_share():
    per_call = {"dispatches": 1, "launch_equivalent": 1000}
    gpu_costs = {**COSTS, "kernel_launch_s": 4e-6}
    findings = diagnose(facts(per_call=per_call, platform="gpu", costs=gpu_costs))
    launch = next(f for f in findings if f.cost == Cost.GPU_LAUNCH)
    assert not launch.estimate and launch.share == pytest.approx(1000 * 4e-6 / 0.016)


def test_transposes_in_compiled_loop_code_are_a_layout_finding():
    looping = {
        "loops": [{"trip_count": 100, "body_kernels": 5}],
        "transposes_inside_loops": 1,
        "transposes_outside_loops": 0,
        "copies_inside_loops": 9,
        "calls_per_run": 1,
    }
    static = {"executables": {"jit_kernel": looping}}
    layout = next(f for f in diagnose(facts(static=static)) if f.cost == Cost.LAYOUT)
    assert "1 transposes per call inside the loop body (and 9 copies" in layout.evidence
    # eager transposes of code that is not jitted are no loop's layout
    eager = {"transpose": 12, "copy": 9}
    assert Cost.LAYOUT not in costs(diagnose(facts(kernels_by_op=eager)))
    flat = {"executables": {"jit_kernel": {**looping, "loops": []}}}
    assert Cost.LAYOUT not in costs(diagnose(facts(static=flat)))


def test_temporaries_that_dominate_the_memory_are_named():
    primes = [{"instruction": "dynamic-update-slice_fusion", "opcode": "fusion", "bytes": 80e6}]
    memory = {"temp_bytes": 483e6, "minimum_bytes": 400e6, "temporaries": primes * 2}
    finding = next(f for f in diagnose(facts(memory=memory)) if f.cost == Cost.TEMPORARIES)
    assert finding.share is None  # memory, not a share of the time
    assert "483.0 MB of temporaries per call, 1.2x the 400.0 MB" in finding.evidence
    assert "dynamic-update-slice_fusion 80.0 MB" in finding.evidence
    small = {**memory, "temp_bytes": 163e6}  # the time-major scan: 0.41x
    tiny = {**memory, "minimum_bytes": 56}  # MPPI: a configuration and a seed
    for other in (small, tiny):
        assert Cost.TEMPORARIES not in costs(diagnose(facts(memory=other)))


def test_live_arrays_that_grow_every_call_are_named():
    growth = {"live_growth": {"bytes_per_call": 4_000_000, "arrays_per_call": 2}}
    finding = next(f for f in diagnose(facts(memory=growth)) if f.cost == Cost.LEAK)
    assert finding.share is None and "2 more JAX arrays (4.0 MB)" in finding.evidence
    assert "keeps between calls" in finding.fix
    assert Cost.LEAK not in costs(diagnose(facts(memory={})))


def test_a_closed_over_array_folded_into_the_program_is_named():
    """A jitted function that closes over a 512 x 512 array: XLA folds it into the
    executable as a constant (compiled for real, its optimized HLO read)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from scanbench.probes.hlo import estimate

    weights = jnp.asarray(np.random.default_rng(0).random((512, 512), np.float32))
    x = jnp.ones((4, 512), weights.dtype)
    text = jax.jit(lambda x: x @ weights + 1.0).lower(x).compile().as_text()
    static = {"executables": {"jit_closure": estimate(text).to_json()}}
    finding = next(f for f in diagnose(facts(static=static)) if f.cost == Cost.CONSTANTS)
    assert finding.share is None  # compile time and memory, not the call's time
    folded = f"{weights.nbytes / 1e6:,.1f} MB of arrays folded into the compiled program"
    assert folded in finding.evidence  # the array's own bytes
    assert "[512,512])" in finding.evidence and "as arguments" in finding.fix
    passed = jax.jit(lambda x, w: x @ w + 1.0).lower(x, weights)
    static = {"executables": {"jit_argument": estimate(passed.compile().as_text()).to_json()}}
    assert Cost.CONSTANTS not in costs(diagnose(facts(static=static)))


@pytest.mark.parametrize(("x_bandwidth", "x_roofline"), [(1.3, None), (None, 1.3)])
def test_a_cell_near_its_limit_says_so(x_bandwidth, x_roofline):
    findings = diagnose(facts(x_bandwidth=x_bandwidth, x_roofline=x_roofline))
    assert findings[0].cost == Cost.NEAR_LIMIT
    assert "nothing left to gain from the loop structure" in findings[0].fix
    overhead = {"dispatch_fraction": 0.3}
    busy = diagnose(facts(x_bandwidth=x_bandwidth, x_roofline=x_roofline,
                          per_call={"dispatches": 500}, decomposition=overhead))  # fmt: skip
    assert busy[0].cost == Cost.DISPATCH  # an overhead to fix first


def test_limits_are_near_only_within_1_5x_and_compute_is_never_the_rest():
    # the Numba MPPI run at 2.84x its roofline still draws, weights and steps the plant
    assert diagnose(facts(x_roofline=2.84))[0].cost == Cost.UNKNOWN
    # a copy of the working set's level reaches 1.0-1.1x (tests/scenarios/test_known_answers.py)
    assert diagnose(facts(x_bandwidth=1.4))[0].cost == Cost.NEAR_LIMIT
    # far from the memory bound is no evidence of arithmetic: "compute-bound" needs a count
    far = diagnose(facts(x_bandwidth=2.84, bound_level="L3"))
    assert Cost.COMPUTE not in costs(far) and far[0].cost == Cost.UNKNOWN


def test_the_module_doc_argues_for_the_constants_it_has():
    assert "3.5x" not in diagnosis.__doc__ and NEAR_LIMIT == 1.5
    assert "`NEAR_LIMIT`" in diagnosis.__doc__ and "`MOST`" in diagnosis.__doc__


ONE, TWO = Cores(1.0, True), Cores(2.0, True)


def test_a_faster_backend_of_the_table_is_named_with_its_interval_and_what_differs():
    counts = {"dispatches": (1.0, 0.0), "kernels": (1108.0, 0.0)}
    faster = (Neighbour("numba-serial", 2.9, 2.8, 3.0, counts, (ONE, ONE)),)
    findings = diagnose(facts(x_bandwidth=1.2, faster=faster))
    assert findings[0].cost == Cost.FASTER  # never "near a limit" beside a faster one
    assert findings[0].neighbour == faster[0]  # the prediction, as numbers (its score)
    assert findings[0].evidence == (
        "numba-serial does the same work 2.90x faster (95% interval 2.80-3.00x; "
        "dispatches 1 vs 0; kernels 1,108 vs 0)"
    )
    overhead = {"dispatch_fraction": 0.4}
    busy = diagnose(facts(per_call={"dispatches": 500}, decomposition=overhead, faster=faster))
    assert costs(busy)[:2] == [Cost.DISPATCH, Cost.FASTER]
    assert "(also: numba-serial 2.90x faster" in summary(busy)


def test_a_faster_backend_on_other_cores_is_named_with_both_counts_and_per_core():
    on_two = Neighbour("numba-time-major", 2.83, 2.80, 2.88, {}, (ONE, TWO))
    (first, *_) = diagnose(facts(faster=(on_two,)))
    assert "on 2.0 cores against this backend's 1.0 core: 1.42x less core time per call" in (
        first.evidence
    )
    # the MPPI scanned backend against the 2-core sharded one: faster in wall time only
    sharded = Neighbour("sharded (2 devices)", 1.83, 1.82, 1.86, {}, (ONE, TWO))
    assert "1.09x more core time per call" in diagnose(facts(faster=(sharded,)))[0].evidence
    declared = Neighbour("sharded", 1.83, 1.82, 1.86, {}, (Cores(1.0, False), Cores(2.0, False)))
    assert (
        "2.0 cores (declared; threads not measured)"
        in diagnose(facts(faster=(declared,)))[0].evidence
    )


def test_a_ratio_from_a_disturbed_or_scaled_cell_says_it_may_not_hold():
    shaky = Neighbour("numba", 1.89, 1.78, 1.94, {}, (ONE, ONE),
                      caveats=("this backend's cell was disturbed",))  # fmt: skip
    (first, *_) = diagnose(facts(faster=(shaky,)))
    assert first.evidence.endswith("; the ratio may not hold: this backend's cell was disturbed)")
    assert (
        "may not hold"
        not in diagnose(facts(faster=(dataclasses.replace(shaky, caveats=()),)))[0].evidence
    )


def test_a_ratio_from_too_few_samples_gives_their_range_not_an_interval():
    few = Neighbour("numba", 34.08, 24.75, 42.53, {}, (ONE, ONE), ranged=True)
    (first, *_) = diagnose(facts(faster=(few,)))
    assert "34.08x faster (samples' range 24.75-42.53x: too few samples for a 95% interval" in (
        first.evidence
    )


def test_the_same_program_with_other_flags_is_said_to_be_one():
    flags = Neighbour("scanned +xla", 1.37, 1.34, 1.37, {}, (ONE, ONE), same_program=True)
    (first, *_) = diagnose(facts(faster=(flags,)))
    assert first.evidence.startswith(
        "scanned +xla, the same program with other XLA flags, does the same work 1.37x faster"
    )


def test_waits_per_item_are_named_with_their_measured_cost():
    per_call = {"dispatches": 202, "waits": 200}
    decomposition = {"sync_fraction": 0.65, "dispatch_fraction": 0.08, "device_fraction": 0.05}
    findings = diagnose(facts(per_call=per_call, decomposition=decomposition,
                              costs={**COSTS, "wait_s": 28e-6}))  # fmt: skip
    assert findings[0].cost == Cost.SYNC
    assert findings[0].evidence == "200 waits per call x 28 us = 65% of the time"


def test_unexplained_host_time_of_a_jax_backend_is_never_the_work_itself():
    decomposition = {"device_fraction": 0.1, "host_fraction": 0.7}
    (first, *_) = diagnose(facts(decomposition=decomposition))
    assert first.cost == Cost.UNEXPLAINED and "scanbench profile" in first.fix
    numba = diagnose(facts(decomposition=decomposition, engine="numba"))[0]
    assert numba.cost == Cost.UNKNOWN  # host code: its host time is its own, not explained
    assert "profile the host code" in numba.fix
    # a traced call far from the median gives no host share to blame
    unreliable = {
        **decomposition,
        "reliable": False,
        "unreliable": "the traced call took 6.0x the median",
    }
    (first, *_) = diagnose(facts(decomposition=unreliable))
    assert first.cost == Cost.UNKNOWN
    assert "no traced share: the traced call took 6.0x the median" in first.evidence


def test_a_label_below_the_minor_share_is_not_shown():
    per_call = {"dispatches": 500, "compiles": 1}
    decomposition = {"dispatch_fraction": 0.6, "compile_fraction": 0.01}
    text = summary(diagnose(facts(per_call=per_call, decomposition=decomposition)))
    assert text.startswith("dispatch-bound") and "recompiling" not in text


def test_without_a_timed_run_the_counts_alone_name_the_overheads():
    per_call = {"dispatches": 7631, "h2d": 4618, "host_conversions": 0, "compiles": 0}
    findings = diagnose(Facts(median_s=None, per_call=per_call))
    assert costs(findings) == [Cost.DISPATCH, Cost.TRANSFER]
    assert "a timed run gives their share" in findings[0].evidence
    assert diagnose(Facts(median_s=None, per_call={"dispatches": 1}))[0].cost == Cost.UNKNOWN


# ------------------------------------------------------------------ the bundled scenarios


def test_stored_tdma_cells_are_diagnosed_as_the_issue_describes():
    """From a run the harness stored (tests/support/data/tdma.json): the best Numba solver at 3.2x
    the bound is not told it is near a limit, the issue's scan shows its transposes, and
    the per-column Python loop at smoke is dispatch-bound."""

    from scanbench.reports.frame import records_frame
    from scanbench.results import load_run

    frame = records_frame([load_run(DATA / "tdma.json")])
    rows = frame.set_index(["size", "backend"])["diagnosis"]
    # 3.2x the (DRAM) bound is not "near a limit": a copy reaches 1.0-1.1x
    assert not rows["default", "numba-time-major"].startswith("near a limit")
    assert "layout" in rows["default", "scanned-issue"]
    assert rows["smoke", "sequential-jax"].startswith("dispatch-bound: 202 dispatches")


def counted(scenario_name: str, backend_name: str, dtype: str):
    """A bundled cell counted in this process at smoke (x64 as the worker sets it, then
    restored)."""
    import jax

    from scanbench.environment import device_info
    from scanbench.probes.passes import counts_per_call
    from scanbench.timing import call_and_wait
    from tests.conftest import bundled

    x64 = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", dtype == "float64")
    try:
        scenario = bundled(scenario_name)
        backend, size = scenario.backend(backend_name), scenario.size("smoke")
        prepared = backend.prepare(scenario.make_inputs(size, 0, dtype), size)
        call_and_wait(backend.run, prepared)
        return counts_per_call(scenario, backend, size, prepared, 0, dtype, device_info())
    finally:
        jax.config.update("jax_enable_x64", x64)


def test_the_real_world_mppi_loop_is_named_for_its_dispatches_and_transfers():
    counts = counted("mppi_tuning", "sequential", "float32")
    findings = diagnose(Facts(None, counts.per_call(), counts.breakdowns()["kernels_by_op"]))
    assert costs(findings)[:2] == [Cost.DISPATCH, Cost.TRANSFER]


def test_the_issues_scan_is_named_for_its_transposes():
    counts = counted("tridiagonal", "scanned-issue", "float64")
    findings = diagnose(Facts(None, counts.per_call(), static=dict(counts.static)))
    layout = next(f for f in findings if f.cost == Cost.LAYOUT)
    assert "transpose" in layout.evidence
    time_major = counted("tridiagonal", "scanned-time-major", "float64")
    clean = diagnose(Facts(None, time_major.per_call(), static=dict(time_major.static)))
    assert Cost.LAYOUT not in costs(clean)  # transposed once, outside the call


# ------------------------------------------------- a label only with its evidence

RATES = {
    "flops_per_s": {"float64": {"one": 40e9, "all": 80e9, "threads": 2.0}},
    "fault_s": 1.8e-6,
    "fault_kind": "base page",
    "numpy_call_s": 0.8e-6,
}


def test_memory_bound_counts_the_known_traffic_and_the_fresh_pages():
    """The blocked TDMA scan at default: 400 MB at the 1-core DRAM copy (41.6 GB/s) is
    9.6 ms of a 41.4 ms median, but a fresh 80 MB output every call is 19,531 page faults:
    with them the known traffic is most of the time, and the fix is to allocate once."""
    base = {
        "median_s": 0.0414,
        "work": {"bytes": 400e6},
        "bound_bytes_per_s": 41.6e9,
        "bound_level": "DRAM",
        "rates": RATES,
        "cores": ONE,
    }
    without = diagnose(facts(**base))
    assert Cost.MEMORY not in costs(without)  # 23%: no label, said in the not-known text
    assert "9.62 ms, of a 41.4 ms median" in without[0].evidence
    (first, *_) = diagnose(facts(**base, faults_per_call=19_531))
    assert first.cost == Cost.MEMORY and first.share == 1.0  # 108%: never past 100%
    assert "its parts add up to 108% of the median" in first.evidence
    assert (
        "19,531 page faults per call on fresh memory x 1.8 us (a base page's: a floor): 35.2 ms"
        in first.evidence
    )
    assert "allocate the output" in first.fix


def test_faults_are_priced_only_at_a_base_pages_price_and_over_the_cores_used():
    """A price of the older mixed-page probe (no `fault_kind`) overstates a base page's
    4-5x: such faults are not priced but named as not known. Faults taken on two measured
    cores cost half the time, said as an assumption."""
    base = {
        "median_s": 0.0414,
        "work": {"bytes": 400e6},
        "bound_bytes_per_s": 41.6e9,
        "bound_level": "DRAM",
        "faults_per_call": 19_531,
    }
    mixed = {key: value for key, value in RATES.items() if key != "fault_kind"}
    (first, *_) = diagnose(facts(**base, rates=mixed, cores=ONE))
    assert first.cost == Cost.UNKNOWN
    assert "a base page's fault price" in first.evidence
    (first, *_) = diagnose(facts(**base, rates=RATES, cores=TWO))
    assert first.cost == Cost.MEMORY
    assert "x 1.8 us (a base page's: a floor) over the 2.0 cores it used" in first.evidence
    assert "17.6 ms" in first.evidence  # 19,531 x 1.8 us / 2


def test_faults_are_priced_at_most_at_the_kernel_time_the_call_measured():
    """A fault is handled in the kernel: its time is at most the call's system CPU time
    (the ceiling beside the base-page price's floor)."""
    base = {
        "median_s": 0.0414,
        "work": {"bytes": 400e6},
        "bound_bytes_per_s": 41.6e9,
        "faults_per_call": 19_531,
        "rates": RATES,
        "cores": ONE,
    }
    (first, *_) = diagnose(facts(**base, system_per_call=20e-3))
    assert "capped at the 20 ms the call spent in the kernel: 20 ms" in first.evidence
    (first, *_) = diagnose(facts(**base, system_per_call=50e-3))
    assert "capped" not in first.evidence and "35.2 ms" in first.evidence
    # no kernel time read (below the clock's resolution): not a cap of zero
    (first, *_) = diagnose(facts(**base, system_per_call=0.0))
    assert "capped" not in first.evidence and "35.2 ms" in first.evidence


def test_the_fresh_memory_fix_follows_where_the_faulted_bytes_come_from():
    """Most fresh bytes in XLA's copies of the inputs: the fix avoids the copies, and
    "donate the output" is not offered (vmapped TDMA: 483 of 563 MB were temporaries)."""
    memory = {
        "output_bytes": 80e6,
        "temp_bytes": 320e6,
        "temporaries": [{"bytes": 240e6, "opcode": "copy", "instruction": "copy.3"}],
    }
    (first, *_) = diagnose(
        facts(
            median_s=0.0414,
            work={"bytes": 400e6},
            bound_bytes_per_s=41.6e9,
            faults_per_call=19_531,
            rates=RATES,
            cores=ONE,
            memory=memory,
        )
    )
    assert first.cost == Cost.MEMORY
    assert "avoid the copies" in first.fix and "allocate the output" not in first.fix
    assert "XLA's copies (240.0 MB)" in first.fix


def test_compute_bound_needs_an_operation_count_at_the_measured_rate():
    static = {"available": True, "flops": 1.2e9, "custom_calls": 0}
    base = {"median_s": 0.040, "dtype": "float64", "rates": RATES, "cores": ONE}
    (first, *_) = diagnose(facts(**base, static=static))
    assert first.cost == Cost.COMPUTE and first.share == pytest.approx(0.75)
    assert "1.2 GFLOP (XLA's cost analysis, loops included)" in first.evidence
    assert "measured float64 FMA rate on 1.0 core (40 GFLOP/s)" in first.evidence
    assert "30 ms, 75% of the 40 ms median" in first.evidence
    # on two cores, twice the rate: 38%, no longer most of the time
    two = {**base, "cores": TWO}
    assert Cost.COMPUTE not in costs(diagnose(facts(**two, static=static)))
    # host code: the scenario's declared flops, or nothing
    numba = {**base, "engine": "numba"}
    assert diagnose(facts(**numba, work={"flops": 1.2e9}))[0].cost == Cost.COMPUTE
    assert Cost.COMPUTE not in costs(diagnose(facts(**numba, static=static)))
    assert MOST == 0.5
    assert "faster unit" in first.fix  # no roofline in the table: nothing to compare


def test_compute_bound_beside_a_roofline_says_when_xla_runs_more_operations():
    """cartpole/default/scanned +xla: compute-bound 55% on XLA's count while the roofline
    kernel does the scenario's arithmetic 3.5x faster per core: XLA's program runs at
    least 0.55 x 3.5 = 1.9x the operations needed, and a faster unit is not the fix."""
    static = {"available": True, "flops": 0.88e9, "custom_calls": 0}
    base = {"median_s": 0.040, "dtype": "float64", "rates": RATES, "cores": ONE}
    (first, *_) = diagnose(facts(**base, static=static, x_roofline=3.5))
    assert first.cost == Cost.COMPUTE and first.share == pytest.approx(0.55)
    assert "at least 1.9x the arithmetic the roofline kernel needs" in first.evidence
    assert first.fix.startswith("fewer operations: XLA's program runs at least 1.9x")
    assert "a GPU" not in first.fix
    found = diagnose(facts(**base, static=static, x_roofline=1.2))  # 0.66x: no excess
    assert not any("roofline kernel needs" in finding.evidence for finding in found)


def test_a_host_loop_of_library_calls_is_named_with_its_iterations():
    """SciPy's gtsv called once per system: 100,000 iterations of 2.7 us per call."""
    hottest = [{"where": "reference.py:30", "count": 100_000, "code": "*_, x, info = gtsv(a)"}]
    base = {"median_s": 0.272, "engine": "scipy", "rates": RATES, "python": {"hottest": hottest}}
    (first, *_) = diagnose(facts(**base))
    assert first.cost == Cost.HOST_LOOP and first.share == pytest.approx(0.08 / 0.272)
    assert first.evidence.startswith(
        "a Python loop of 100,000 iterations per call (reference.py:30: `*_, x, info = gtsv(a)`)"
    )
    assert "at least 80 ms, 29% of the time" in first.evidence
    assert "once over the batch" in first.fix
    counted = diagnose(Facts(None, {"dispatches": 0}, engine="scipy", python={"hottest": hottest}))
    assert counted[0].cost == Cost.HOST_LOOP and "a timed run gives its time" in counted[0].evidence
    # the NumPy sweep at default: 99 iterations of 3.3 ms each do real work
    columns = [{"where": "sequential.py:44", "count": 99, "code": "b[..., i] += -w * c"}]
    numpy = diagnose(
        facts(**{**base, "median_s": 0.33, "engine": "numpy", "python": {"hottest": columns}})
    )
    assert Cost.HOST_LOOP not in costs(numpy) and "99 iterations per call" in numpy[0].evidence
    # a line run once per call (one call into a Numba kernel) is no loop
    once = [{"where": "numba_solvers.py:57", "count": 1, "code": "return kernel(*args)"}]
    numba = diagnose(
        facts(**{**base, "median_s": 1.4e-4, "engine": "numba", "python": {"hottest": once}})
    )
    assert numba[0].cost == Cost.UNKNOWN and "loop" not in numba[0].evidence
    assert "its hottest Python line runs once per call (numba_solvers.py:57" in numba[0].evidence


def test_a_hottest_line_whose_count_did_not_extrapolate_is_no_loop():
    """Counted at 2, 3 and 4 units of `count_along` and not linear, a line's count is
    stored as None (`scanbench.probes.extrapolation`): no loop is claimed, nothing fails
    (qd_tuning's numba cell at `default` crashed the report's gap with a TypeError)."""
    unknown = [{"where": "ribs_loops.py:72", "count": None, "code": "emitters = ["}]
    base = {"median_s": 0.05, "engine": "numba", "rates": RATES, "python": {"hottest": unknown}}
    assert loop_of(facts(**base)) is None
    assert Cost.HOST_LOOP not in costs(diagnose(facts(**base)))


def test_waits_are_priced_by_the_same_loop_without_them():
    """sequential-jax-sync at default: 76% of its traced call inside waits, but the device
    was busy through most of them, and the same loop without the waits is 1.12x faster."""
    per_call = {"dispatches": 202, "waits": 200}
    decomposition = {"sync_fraction": 0.28, "sync_bound": True, "device_fraction": 0.72}
    base = {"median_s": 0.0897, "per_call": per_call, "decomposition": decomposition}

    def sync_of(**extra):
        return next(f for f in diagnose(facts(**base, **extra)) if f.cost == Cost.SYNC)

    sync = sync_of(without_waits=Neighbour("sequential-jax", 1.117, 1.05, 1.2))
    assert sync.share == pytest.approx(1 - 1 / 1.117)
    assert sync.neighbour is not None and sync.neighbour.name == "sequential-jax"
    assert "cost 10% of the time: the same loop without them, sequential-jax" in sync.evidence
    assert "cores" not in sync.evidence
    # the loop without the waits ran on more cores (the host queues beside XLA): said
    cores = (Cores(1.2, True), Cores(1.7, True))
    sync = sync_of(without_waits=Neighbour("sequential-jax", 1.117, 1.05, 1.2, cores=cores))
    assert "1.05-1.20x; on 1.7 cores against this backend's 1.2 cores)" in sync.evidence
    # at smoke the loop with the waits is 1.56x faster: the waits cost nothing measurable
    sync = sync_of(without_waits=Neighbour("sequential-jax", 1 / 1.56, 0.6, 0.66))
    assert sync.share is None and "is 1.56x slower" in sync.evidence
    assert "cost nothing measurable" in sync.evidence
    # without a sibling: the device-idle bound of older results is said to be one
    sync = sync_of(conversions={"waits": 200, "pending_waits": 199, "waited_s": 0.07})
    assert sync.share == 0.28 and "for at most 28% of the time" in sync.evidence


def test_the_roofline_row_is_a_reference_not_diagnosed():
    (only,) = diagnose(facts(reference=True, x_roofline=1.0))
    assert only.cost == Cost.REFERENCE and only.fix == "not diagnosed"


def test_host_time_the_faster_backend_locates_is_not_called_unexplained():
    """mppi_tuning/default/sequential (2026-12-06): host 63% that no count explains led,
    "look at the trace", while its faster backend's gap put 64% of the gap in host code
    between the device calls, profiled (jax fold_in x2576). That neighbour leads."""
    host = Difference(
        "host between calls", 0.465, 0.64, "host code between its 15,422 device calls", "jit"
    )
    gap = Gap(0.721, (host,))
    faster = (Neighbour("sharded", 40.5, 24.4, 43.5, {}, (ONE, TWO), gap=gap),)
    per_call = {"dispatches": 15_422, "h2d": 0, "host_conversions": 0, "compiles": 0}
    decomposition = {
        "device_fraction": 0.26,
        "host_fraction": 0.63,
        "dispatch_fraction": 0.08,
        "reliable": True,
    }
    base = {"median_s": 0.739, "per_call": per_call, "decomposition": decomposition}
    (first, *rest) = diagnose(facts(**base, faster=faster))
    assert first.neighbour is not None and first.neighbour.name == "sharded", first.text()
    assert Cost.UNEXPLAINED not in costs(rest)
    unlocated = (dataclasses.replace(faster[0], gap=Gap(0.721, ())),)
    (first, *_) = diagnose(facts(**base, faster=unlocated))
    assert first.cost == Cost.UNEXPLAINED


def test_faults_of_huge_pages_are_priced_at_a_huge_pages_price():
    """A call that allocates 400 MB fresh with 200 faults took huge pages (2 MB a fault):
    its faults are priced at the run's huge-page price, not a base page's."""
    rates = {**RATES, "fault_huge_s": 150e-6, "fault_huge_bytes": 2**21}
    base = {
        "median_s": 0.0414,
        "work": {"bytes": 400e6},
        "bound_bytes_per_s": 41.6e9,
        "rates": rates,
        "cores": ONE,
    }
    huge = {"measured": {"bytes": 400e6}}
    (first, *_) = diagnose(facts(**base, faults_per_call=200, memory=huge))
    assert "200 page faults per call on fresh memory x 150 us (a huge page's): 30 ms" in (
        first.evidence
    )
    small = {"measured": {"bytes": 80e6}}
    (first, *_) = diagnose(facts(**base, faults_per_call=19_531, memory=small))
    assert "x 1.8 us (a base page's: a floor)" in first.evidence


CHAIN_RATES = {**RATES, "chain_step_s": {"float64": 5e-9}}
CHAIN_WORK = {"chains": 100_000.0, "chain_steps": 10_000_000.0, "flops": 9e7}


def test_a_serial_backend_whose_chains_take_most_of_the_time_is_latency_bound():
    """numba-serial at default: 100,000 Thomas sweeps of 100 steps, one after another, at
    5 ns a dependent step: 50 ms of a 80 ms median on one core."""
    base = {"median_s": 0.080, "dtype": "float64", "engine": "numba", "rates": CHAIN_RATES}
    serial = facts(**base, work=CHAIN_WORK, cores=ONE, chains="serial")
    (first, *_) = diagnose(serial)
    assert first.cost == Cost.LATENCY and first.share == pytest.approx(0.625)
    assert "100,000 dependent chains of 100 steps, run one after another (declared)" in (
        first.evidence
    )
    assert "5 ns a step" in first.evidence and "50 ms, 62% of the 80 ms median" in first.evidence
    assert first.fix.startswith("interleave independent chains")
    # over two cores (prange over systems) the floor halves: 31%, not most of the time
    assert Cost.LATENCY not in costs(diagnose(dataclasses.replace(serial, cores=TWO)))
    # interleaved, undeclared, or without the measured step: no chain floor is claimed
    for other in (
        dataclasses.replace(serial, chains="interleaved"),
        dataclasses.replace(serial, chains=None),
        dataclasses.replace(serial, rates=RATES),
        dataclasses.replace(serial, work={"flops": 9e7}),
    ):
        assert Cost.LATENCY not in costs(diagnose(other))
    # a floor well above the median: the chains were not serial, whatever was declared
    assert Cost.LATENCY not in costs(diagnose(dataclasses.replace(serial, median_s=0.040)))


def test_the_chain_floor_is_said_where_nothing_is_known():
    base = {"median_s": 0.200, "dtype": "float64", "engine": "numba", "rates": CHAIN_RATES}
    (first, *_) = diagnose(facts(**base, work=CHAIN_WORK, cores=ONE, chains="serial"))
    assert first.cost == Cost.UNKNOWN
    assert "100,000 dependent chains of 100 steps" in first.evidence and "50 ms" in first.evidence

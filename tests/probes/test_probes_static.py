"""Static HLO parsing, transfers, GPU trace parsing and the decomposition (pure parts)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from scanbench import decomposition
from scanbench.counts import Counts
from scanbench.decomposition import PARTS
from scanbench.probes.gpu import (
    COMMAND_BUFFER_FLAG,
    command_buffers_enabled,
    count_gpu_events,
    with_command_buffers,
)
from scanbench.probes.hlo import estimate
from scanbench.probes.spans import measure_spans, union_ns
from scanbench.probes.trace import TraceEvent
from scanbench.probes.transfers import (
    CPU_D2H_NOTE,
    TransferProbeError,
    count_transfers,
    parse_log,
)

SYNTHETIC_HLO = """HloModule jit_f, entry_computation_layout={(f32[8])->f32[8]}

%fused (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  ROOT %neg = f32[8]{0} negate(%p)
}

%body (t: (s32[], f32[8])) -> (s32[], f32[8]) {
  %t = (s32[], f32[8]{0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %x = f32[8]{0} get-tuple-element(%t), index=1
  %neg_fusion = f32[8]{0} fusion(%x), kind=kLoop, calls=%fused
  %copy.1 = f32[8]{0} copy(%neg_fusion)
  %transpose.1 = f32[8]{0} transpose(%copy.1), dimensions={0}
  ROOT %r = (s32[], f32[8]{0}) tuple(%i, %transpose.1)
}

%cond (t: (s32[], f32[8])) -> pred[] {
  %t = (s32[], f32[8]{0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %n = s32[] constant(10)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%inner_body (t: (s32[], f32[8])) -> (s32[], f32[8]) {
  %t = (s32[], f32[8]{0}) parameter(0)
  %x = f32[8]{0} get-tuple-element(%t), index=1
  %i = s32[] get-tuple-element(%t), index=0
  %e = f32[8]{0} exponential(%x)
  ROOT %r = (s32[], f32[8]{0}) tuple(%i, %e)
}

%branch_a (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  %a1 = f32[8]{0} sine(%x)
  ROOT %a2 = f32[8]{0} cosine(%a1)
}

%branch_b (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  ROOT %b1 = f32[8]{0} sine(%x)
}

%small (t: (s32[], f32[8])) -> (s32[], f32[8]) {
  %t = (s32[], f32[8]{0}) parameter(0)
  ROOT %w = (s32[], f32[8]{0}) while(%t), condition=%cond, body=%inner_body, backend_config={"known_trip_count":{"n":"50"}}
}

ENTRY %main (x: f32[8], p: s32[]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  %p = s32[] parameter(1)
  %zero = s32[] constant(0)
  %t0 = (s32[], f32[8]{0}) tuple(%zero, %x)
  %w1 = (s32[], f32[8]{0}) while(%t0), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"10"}}
  %w2 = (s32[], f32[8]{0}) while(%w1), condition=%cond, body=%body
  %c = (s32[], f32[8]{0}) call(%w2), to_apply=%small, frontend_attributes={xla_cpu_small_call="true"}
  %y = f32[8]{0} get-tuple-element(%c), index=1
  %k = f32[8]{0} conditional(%p, %y, %y), branch_computations={%branch_a, %branch_b}
  ROOT %out = f32[8]{0} copy(%k)
}
"""


def decompose(median_s: float, counts: dict, costs: dict) -> dict:
    """`scanbench.decomposition.decompose` of counts written in their stored layout."""
    return decomposition.decompose(median_s, Counts.from_json(counts), costs)


def test_static_estimate_of_synthetic_hlo():
    result = estimate(SYNTHETIC_HLO)
    # w1: 10 x 3 (fusion, copy, transpose); w2: unknown trip count, counted once (3);
    # the small call: 1 kernel on CPU, 50 x 1 launches elsewhere; the conditional: its
    # larger branch (2); the final copy: 1.
    assert result.kernels == 30 + 3 + 1 + 2 + 1
    assert result.launch_equivalent == 30 + 3 + 50 + 2 + 1
    assert result.unknown_trip_count_loops == 1
    assert result.conditionals == 1
    trips = [(loop.trip_count, loop.body_kernels, loop.cpu_native) for loop in result.loops]
    assert trips == [(10, 3, False), (None, 3, False), (50, 1, True)]
    assert result.loops[0].condition_kernels == 1
    assert result.copies_outside_loops == 1 and result.transposes_outside_loops == 0
    assert result.copies_inside_loops == 2 and result.transposes_inside_loops == 2


def test_static_estimate_rejects_text_without_entry():
    with pytest.raises(ValueError, match="ENTRY"):
        estimate("HloModule m\n")


def test_parse_transfer_log():
    log = "\n".join(
        [
            "W1122 guard_lib.cc:125] host-to-device transfer: ",
            "W1122 guard_lib.cc:125] host-to-device transfer: aval=ShapedArray(float32[1000]), "
            "dst_sharding=...",
            "W1122 guard_lib.cc:125] host-to-device transfer: aval=ShapedArray(int32[], "
            "weak_type=True)",
            "W1122 guard_lib.cc:125] device-to-host transfer: aval=ShapedArray(float64[2,3])",
            "unrelated line",
        ]
    )
    cpu = parse_log(log, "cpu")
    assert (cpu.h2d, cpu.h2d_bytes, cpu.h2d_unknown_size) == (3, 4004, 1)
    assert cpu.d2h is None and cpu.note == CPU_D2H_NOTE
    gpu = parse_log(log, "gpu")
    assert (gpu.d2h, gpu.d2h_bytes, gpu.d2h_unknown_size) == (1, 48, 0) and gpu.note == ""


def test_numpy_argument_in_a_loop_of_five_is_five_transfers():
    f = jax.jit(lambda x: x * 2.0)
    host = np.ones(1000, np.float32)
    jax.block_until_ready(f(host))

    def loop():
        for _ in range(5):
            out = f(host)
        return out

    counts = count_transfers(loop, "cpu")
    assert counts.h2d == 5
    device = jax.device_put(host)
    assert count_transfers(lambda: f(device), "cpu").h2d == 0
    assert count_transfers(lambda: f(device), "cpu").note == CPU_D2H_NOTE


def test_explicit_put_has_its_bytes():
    counts = count_transfers(lambda: jax.device_put(np.zeros((4, 8), np.float32)), "cpu")
    assert counts.h2d == 1 and counts.h2d_bytes + 128 * counts.h2d_unknown_size >= 128


def test_hidden_log_is_refused(monkeypatch):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    with pytest.raises(TransferProbeError, match="TF_CPP_MIN_LOG_LEVEL=3"):
        count_transfers(lambda: None, "cpu")


def gpu_event(plane, line, name, **stats):
    return TraceEvent(plane, line, name, 0.0, 1.0, stats)


def test_gpu_parser_on_a_synthetic_trace():
    gpu0, gpu1 = "/device:GPU:0", "/device:GPU:1"
    stream = "Stream #14(compute)"
    events = [
        gpu_event(gpu0, stream, "loop_add_fusion", hlo_op="add_fusion"),
        gpu_event(gpu0, stream, "loop_add_fusion", hlo_op="add_fusion"),
        gpu_event(gpu1, stream, "gemm_kernel"),
        gpu_event(gpu0, "XLA Ops", "add_fusion"),  # derived line: not counted again
        gpu_event(gpu0, stream, "MemcpyH2D", memcpy_details="kind_src:pageable size:4096"),
        gpu_event(gpu0, stream, "MemcpyD2H", memcpy_details="size:8 dest:0 async:0"),
        gpu_event(gpu0, stream, "MemcpyD2D", memcpy_details="size:64", hlo_op="copy.3"),
        gpu_event(gpu0, stream, "Memset"),
        gpu_event("/host:CUPTI", "CUPTI", "cuLaunchKernel"),
        gpu_event("/host:CUPTI", "CUPTI", "cuLaunchKernelEx"),
        gpu_event("/host:CUPTI", "CUPTI", "cuGraphLaunch"),
        gpu_event("/host:CPU", "python3", "cuLaunchKernel"),
    ]
    counts = count_gpu_events(events, command_buffers=False)
    assert counts.kernels == 3
    assert counts.kernels_by_device == {"GPU:0": 2, "GPU:1": 1}
    assert counts.memcpy == {"MemcpyH2D": 1, "MemcpyD2H": 1}
    assert counts.memcpy_bytes == {"MemcpyH2D": 4096, "MemcpyD2H": 8}
    assert counts.xla_internal_memcpy == 1
    assert counts.kernel_launch_calls == 2 and counts.graph_launches == 1
    assert counts.command_buffers_during_profiling is False


def test_command_buffer_environment():
    env = with_command_buffers({"XLA_FLAGS": "--xla_dump_to=/tmp/x"})
    assert env["XLA_FLAGS"] == f"--xla_dump_to=/tmp/x {COMMAND_BUFFER_FLAG}"
    assert command_buffers_enabled(env["XLA_FLAGS"])
    assert with_command_buffers(env) == env
    assert not command_buffers_enabled("")


COSTS = {
    "dispatch_queued_s": 10e-6,
    "kernel_launch_s": 1e-6,
    "h2d_latency_s": 50e-6,
    "h2d_bytes_per_s": 1e9,
    "d2h_latency_s": 20e-6,
    "d2h_bytes_per_s": 1e9,
}


def test_decomposition_adds_up():
    counts = {
        "trace": {"dispatches": 100, "kernels": 1000},
        "transfers": {"h2d": 10, "h2d_bytes": 1_000_000, "d2h": None},
    }
    result = decompose(0.01, counts, COSTS)
    assert result["dispatch_s"] == pytest.approx(1e-3)
    assert result["launch_s"] == pytest.approx(1e-3)
    assert result["transfer_s"] == pytest.approx(10 * 50e-6 + 1e-3)
    assert result["compile_s"] == 0.0 and not result["compile_measured"]
    assert result["remainder_s"] == pytest.approx(0.01 - 3.5e-3)
    # no spans (results stored before device time was measured): device and host unknown
    assert result["device_s"] is None and result["host_s"] is None
    known = sum(result[f"{k}_fraction"] for k in PARTS if k not in ("device", "host"))
    assert known + result["remainder_fraction"] == pytest.approx(1.0) and not result["overlap"]


def test_a_count_without_a_number_is_not_decomposed_and_says_which():
    """A count the linear model found not linear is stored as None: the decomposition says
    so instead of failing (it once stopped a whole `--count-parts` run)."""
    counts = {
        "trace": {"dispatches": 100, "kernels": 1000},
        "transfers": {"h2d": 10, "h2d_bytes": None, "d2h": None},
    }
    result = decompose(0.01, counts, COSTS)
    assert result == {"error": "cannot decompose: no number for transfers.h2d_bytes (not linear)"}


def _spans(busy_s, wall_s, events=100, busy_events=0, conversions=0):
    return {
        "wall_s": wall_s,
        "device_busy_s": busy_s,
        "events": events,
        "busy_events": busy_events,
        "host_conversions": conversions,
    }


def test_decomposition_measures_device_time_and_names_the_host_rest():
    counts = {
        "trace": {"dispatches": 100, "kernels": 1000},
        "transfers": {"h2d": 0, "h2d_bytes": 0},
        "spans": _spans(busy_s=0.005, wall_s=0.01),  # the traced call took the median
    }
    result = decompose(0.01, counts, COSTS)
    # device: the measured busy time, less the launch estimate that lies inside it
    assert result["device_s"] == pytest.approx(0.005 - 1e-3)
    assert result["host_s"] == pytest.approx(0.01 - 1e-3 - 1e-3 - 0.004)
    assert sum(result[f"{k}_fraction"] for k in PARTS) == pytest.approx(1.0)
    assert result["device_measured"] and not result["overlap"]
    busy = {**counts, "spans": _spans(busy_s=0.01, wall_s=0.01)}
    result = decompose(0.01, busy, COSTS)  # dispatches could not overlap a busy device
    assert result["overlap"] and result["host_s"] == 0.0
    assert result["overlap_fraction"] == pytest.approx(0.1)


def test_device_time_is_the_busy_share_of_the_traced_call_without_the_profiler():
    """Traced: 18 ms busy of a 30 ms call, 1000 events recorded at 10 us each, 900 of them
    inside the busy time: without recording, 9 ms busy of 20 ms, a share of 0.45."""
    counts = {
        "trace": {"dispatches": 1, "kernels": 0},
        "transfers": {"h2d": 0, "h2d_bytes": 0},
        "spans": _spans(busy_s=0.018, wall_s=0.030, events=1000, busy_events=900),
    }
    costs = {**COSTS, "profiler_event_s": 10e-6}
    assert decompose(0.020, counts, costs)["device_s"] == pytest.approx(0.45 * 0.020)
    # a traced call twice as slow as the timed ones (a spell): the share still holds
    slow = {**counts, "spans": _spans(busy_s=0.036, wall_s=0.060, events=0)}
    assert decompose(0.020, slow, COSTS)["device_s"] == pytest.approx(0.6 * 0.020)
    older = {**counts, "spans": {"busy_fraction": 0.5}}  # spans of another layout: not used
    assert decompose(0.020, older, costs)["device_s"] is None


def test_transfers_are_priced_by_their_path_and_unknown_paths_as_a_range():
    costs = {
        **COSTS,
        "arg_python_scalar_s": 2e-6,
        "arg_numpy_array_s": 6e-6,
        "d2h_pending_s": 40e-6,
    }
    counts = {
        "trace": {"dispatches": 0, "kernels": 0},
        # 3 device_put-like transfers of 1 MB in all, 100 jitted-call arguments
        "transfers": {"h2d": 103, "h2d_bytes": 1_000_000, "h2d_unknown_size": 100, "d2h": None},
        "spans": _spans(busy_s=0.0, wall_s=0.01, conversions=10),
    }
    result = decompose(0.01, counts, costs)
    put = 3 * 50e-6 + 1e-3
    assert result["transfer_low_s"] == pytest.approx(put + 100 * 2e-6 + 10 * 20e-6)
    assert result["transfer_high_s"] == pytest.approx(put + 100 * 6e-6 + 10 * 40e-6)
    assert result["transfer_s"] == pytest.approx(
        (result["transfer_low_s"] + result["transfer_high_s"]) / 2
    )
    gpu = {**counts, "transfers": {**counts["transfers"], "d2h": 2, "d2h_bytes": 0}}
    result = decompose(0.01, gpu, costs)  # off CPU, D2H are logged: priced as such
    assert result["transfer_low_s"] == pytest.approx(put + 100 * 2e-6 + 2 * 20e-6)


def test_decomposition_names_recompilation_measured_in_the_call():
    counts = {
        "trace": {"dispatches": 0, "kernels": 0},
        "transfers": {"h2d": 0, "h2d_bytes": 0},
        "compilations": {"traces": 3, "compiles": 2, "total_s": 0.004},
    }
    result = decompose(0.01, counts, COSTS)
    assert result["compile_s"] == pytest.approx(0.004) and result["compile_measured"]
    assert result["compile_fraction"] == pytest.approx(0.4)
    assert result["remainder_s"] == pytest.approx(0.006)


def test_decomposition_flags_overlap_and_missing_counts():
    counts = {"trace": {"dispatches": 10_000, "kernels": 0}, "transfers": {"h2d": 0}}
    result = decompose(0.01, counts, COSTS)
    assert result["overlap"] and result["remainder_s"] == 0.0
    assert "missing trace counts" in decompose(0.01, {}, COSTS)["error"]


def test_decomposition_scales_counts_made_on_a_smaller_size():
    counts = {
        "trace": {"dispatches": 10, "kernels": 0},
        "transfers": {"h2d": 1, "h2d_bytes": 0},
        "scale": 20.0,
    }
    result = decompose(1.0, counts, COSTS)
    assert result["dispatch_s"] == pytest.approx(20 * 10 * 10e-6)
    assert result["transfer_s"] == pytest.approx(20 * 50e-6)


def _event(name, start, duration, line="python", plane="/host:CPU", **stats):
    return TraceEvent(plane, line, name, float(start), float(duration), stats)


def test_union_counts_overlapping_intervals_once():
    assert union_ns([]) == 0.0
    assert union_ns([(0, 10), (5, 15), (20, 30), (21, 22)]) == 25.0


def test_device_busy_is_the_executing_time_and_kernel_busy_its_kernels():
    worker = "tf_XLAPjRtCpuClient/1"
    events = [
        _event("PjitFunction(f)", 0, 1000),
        # an asynchronous execution: its executor runs 100..600, kernels inside with gaps
        _event("ThunkExecutor::Execute", 100, 500, line=worker),
        _event("ThunkExecutor::Execute (wait for completion)", 590, 15, line=worker),
        _event("while.3", 150, 400, line=worker, hlo_op="while.3"),
        _event("fusion", 160, 100, line=worker, hlo_op="fusion"),
        _event("fusion", 300, 100, line=worker, hlo_op="fusion"),
        # an inline execution on the dispatching thread: part of the dispatch, not device
        _event("copy", 700, 50, hlo_op="copy"),
        _event("np.asarray(jax.Array)", 800, 20),
        _event("np.asarray(jax.Array)", 900, 20),
    ]
    spans = measure_spans(events, wall_s=1e-6)
    assert spans.device_busy_s == pytest.approx(505e-9)  # 100..600, then its wait to 605
    assert spans.kernel_busy_s == pytest.approx(200e-9)  # the while container is no kernel
    assert spans.inline_busy_s == pytest.approx(50e-9)
    assert spans.host_conversions == 2
    assert (spans.events, spans.busy_events) == (len(events), 5)  # executor + wait, while, 2
    # which kernels take the time: the two fusions off the dispatching thread, not the
    # while container, not the inline copy
    assert spans.busy_by_op == pytest.approx({"fusion": 200e-9})


def test_a_wait_costs_only_the_time_the_device_was_idle_inside_it():
    worker = "tf_XLAPjRtCpuClient/1"
    events = [
        _event("ThunkExecutor::Execute", 100, 300, line=worker),  # busy 100..400
        _event("ThunkExecutor::Execute", 600, 100, line=worker),  # busy 600..700
        _event("scanbench wait", 150, 300),  # 150..450: idle only 400..450
        _event("scanbench wait", 500, 50),  # 500..550: idle all along
        _event("scanbench wait", 620, 40),  # inside the second execution: never idle
    ]
    spans = measure_spans(events, wall_s=1e-6)
    assert spans.wait_s == pytest.approx(390e-9)
    assert spans.wait_idle_s == pytest.approx(100e-9)


def test_gpu_busy_time_is_read_per_device_plane():
    events = [
        _event("fusion", 0, 100, line="Stream #7(compute)", plane="/device:GPU:0"),
        _event("MemcpyD2H", 50, 100, line="Stream #8(memcpy)", plane="/device:GPU:0"),
        _event("fusion", 0, 300, line="Stream #7(compute)", plane="/device:GPU:1"),
        _event("fusion", 0, 300, line="XLA Ops", plane="/device:GPU:1"),  # a derived line
        _event("fusion", 0, 900, line="tf_XLA/1", hlo_op="fusion"),  # host plane: not GPU
    ]
    spans = measure_spans(events, wall_s=1e-6)
    assert spans.busy_by_device == pytest.approx({"GPU:0": 150e-9, "GPU:1": 300e-9})
    assert spans.busy_by_op == pytest.approx({"fusion": 400e-9, "MemcpyD2H": 100e-9})
    assert spans.device_busy_s == pytest.approx(300e-9)
    assert spans.busy_events == 0  # device clocks: the host profiler's cost is not in them

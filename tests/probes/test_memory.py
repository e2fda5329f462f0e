"""Memory: XLA's static plan, the measured peak of one call, the minimum, in the reports."""

from __future__ import annotations

import numpy as np
import pytest

from scanbench.cells import Cell
from scanbench.environment import device_info
from scanbench.execution.worker import run_cell
from scanbench.probes import memory
from scanbench.probes.buffer_assignment import fields, temporaries
from scanbench.probes.gpu import device_peak
from scanbench.probes.memory import (
    MeasuredPeak,
    _status_bytes,
    rss_peak,
    static_plan,
    tree_nbytes,
)
from scanbench.probes.passes import counts_per_call
from scanbench.timing import TimingConfig, call_and_wait
from tests.conftest import bundled
from tests.support.paths import SCENARIO_FILES
from tests.support.scenario_files.allocates import TEMPORARY_BYTES

ALLOCATES = str(SCENARIO_FILES / "allocates.py")
QUICK = TimingConfig(warmup=0, min_time_s=0.0, min_count=3, max_time_s=0.1)
N = 2_000_000  # allocates' smoke size: 16 MB of float64 in, 16 MB out


@pytest.fixture(scope="module")
def allocates_records():
    return {
        backend: run_cell(Cell("allocates", backend, "smoke", "float64", 0, ALLOCATES), QUICK)
        for backend in ("numpy-output-only", "numpy-temporary", "jax-cumsum")
    }


def test_a_known_numpy_temporary_is_measured_within_10_percent(allocates_records):
    memory = {name: record.counts.memory for name, record in allocates_records.items()}
    output = 8 * N
    for record in memory.values():
        assert record["input_bytes"] == record["output_bytes"] == output
        assert record["minimum_bytes"] == 2 * output
        assert record["measured"]["method"] == "rss" and record["measured"]["exact"]
    only_output = memory["numpy-output-only"]["measured"]["bytes"]
    with_temporary = memory["numpy-temporary"]["measured"]["bytes"]
    assert only_output == pytest.approx(output, rel=0.1)
    assert with_temporary - output == pytest.approx(TEMPORARY_BYTES, rel=0.1)


def test_a_jax_call_is_measured_as_its_static_plan_says(allocates_records):
    memory = allocates_records["jax-cumsum"].counts.memory
    # XLA holds the output and its temporaries while the call runs (the inputs exist before)
    planned_growth = memory["output_bytes"] + memory["temp_bytes"]
    assert memory["temp_bytes"] >= 8 * N  # the cumulative sum, one array of the input's size
    assert memory["measured"]["bytes"] == pytest.approx(planned_growth, rel=0.1)
    assert memory["temporaries"][0]["bytes"] == 8 * N


def test_the_tdma_scans_name_the_primes_temporaries_at_the_size_the_hlo_implies():
    import jax

    scenario = bundled("tridiagonal")
    size = scenario.size("smoke")
    n, batch = size["n"], size["batch"]
    prime = n * batch * 8  # one float64 array of c' or d', (n, batch)
    with jax.enable_x64(True):
        plans = {}
        for name in ("scanned-issue", "scanned-time-major"):
            backend = scenario.backend(name)
            prepared = backend.prepare(scenario.make_inputs(size, 0, "float64"), size)
            (compiled, _), *_ = backend.executables(prepared).values()
            plans[name] = static_plan(compiled)
    for name, plan in plans.items():
        stacked = [t for t in plan["temporaries"] if "dynamic-update-slice" in t["instruction"]]
        assert len(stacked) == 2, (name, plan["temporaries"])  # c' and d', stacked by the scan
        assert all(t["bytes"] == prime for t in stacked)
        assert plan["argument_bytes"] == 4 * prime and plan["output_bytes"] == prime
    # the issue's scan also transposes its four inputs to time-major inside the call
    issue, time_major = plans["scanned-issue"], plans["scanned-time-major"]
    assert time_major["temp_bytes"] >= 2 * prime
    assert issue["temp_bytes"] - time_major["temp_bytes"] == pytest.approx(4 * prime, rel=0.01)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, value: int | bytes) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def test_temporaries_are_read_from_the_wire_format():
    def instruction(name, opcode, ident):
        return _field(2, _field(1, name.encode()) + _field(2, opcode.encode()) + _field(35, ident))

    module = _field(
        3,
        _field(1, b"main")
        + instruction("fusion.1", "fusion", 7)
        + instruction("p", "parameter", 8)
        + instruction("copy.2", "copy", 9),
    )

    def buffer(ident, size, at):
        return _field(1, _field(1, ident) + _field(2, size) + _field(3, _field(4, at)))

    def allocation(*assigned, **flags):
        body = b"".join(_field(9, _field(1, ident) + _field(3, size)) for ident, size in assigned)
        return _field(3, body + b"".join(_field(number, 1) for number in flags.values()))

    assignment = (
        buffer(0, 4000, 7)  # id 0: proto3 leaves it out
        + buffer(1, 800, 8)
        + buffer(2, 1000, 9)
        + buffer(3, 9999, 9)
        + allocation((0, 4000), (1, 800), (2, 1000))  # the temporary allocation
        + allocation((3, 9999), live_out=7)  # an output: not a temporary
    )
    found = temporaries(assignment, module)
    assert [(t.instruction, t.opcode, t.bytes) for t in found] == [
        ("fusion.1", "fusion", 4000),
        ("copy.2", "copy", 1000),
    ]  # the loop parameter aliases: left out
    assert list(fields(_field(1, 300) + _field(2, b"ab"))) == [(1, 300), (2, b"ab")]
    with pytest.raises(ValueError, match="wire type 3"):
        list(fields(_varint(1 << 3 | 3)))


def test_device_peak_from_synthetic_memory_stats():
    readings = iter(
        [
            [
                {"bytes_in_use": 100, "peak_bytes_in_use": 500},
                {"bytes_in_use": 0, "peak_bytes_in_use": 50},
            ],
            [
                {"bytes_in_use": 100, "peak_bytes_in_use": 900},
                {"bytes_in_use": 0, "peak_bytes_in_use": 80},
            ],
        ]
    )
    output, peak = device_peak(lambda: "out", lambda: next(readings))
    assert output == "out"
    assert peak == MeasuredPeak(800 + 80, "device", exact=True)
    # a call below an earlier peak is only bounded by it
    readings = iter([[{"bytes_in_use": 100, "peak_bytes_in_use": 500}]] * 2)
    _, bounded = device_peak(lambda: None, lambda: next(readings))
    assert bounded.bytes == 400 and not bounded.exact and "at most" in bounded.note
    _, none = device_peak(lambda: None, lambda: [None])
    assert none.bytes is None and "no memory_stats" in none.note


def test_rss_peak_says_why_when_the_peak_cannot_be_reset(tmp_path):
    status = tmp_path / "status"
    status.write_text("VmRSS:\t 100 kB\nVmHWM:\t 300 kB\n")
    output, peak = rss_peak(lambda: 1, status=status, clear_refs=tmp_path, trim=lambda: True)
    assert output == 1 and peak.bytes is None and "cannot reset the peak RSS" in peak.note
    refs = tmp_path / "clear_refs"
    _, peak = rss_peak(lambda: 1, status=status, clear_refs=refs, trim=lambda: False)
    assert refs.read_text() == "5" and peak.bytes == 200 * 1024
    assert "reused unseen" in peak.note
    with pytest.raises(ValueError, match="no VmHWM line"):
        _status_bytes("VmRSS: 1 kB", "VmHWM")


def test_tree_nbytes_counts_array_leaves():
    import jax.numpy as jnp

    tree = {"a": np.zeros(10), "b": (jnp.ones(3, jnp.float32), 2.0)}
    assert tree_nbytes(tree) == 80 + 12


def test_reports_show_memory_beside_time(allocates_records):
    from scanbench.invocation import Invocation, ScenarioFacts
    from scanbench.reports.frame import records_frame
    from scanbench.reports.html import render as render_html
    from scanbench.reports.markdown import render as render_markdown
    from scanbench.reports.model import build
    from scanbench.reports.plots import memory_vs_size
    from scanbench.results import Run

    records = list(allocates_records.values())
    run = Run({}, Invocation({"allocates": ScenarioFacts("", "elements", None)}), records)
    frame = records_frame([run]).set_index("backend")
    output = 8 * N
    assert frame.loc["numpy-output-only", "x_minimum"] == pytest.approx(1.0, rel=0.1)
    assert frame.loc["numpy-temporary", "x_minimum"] == pytest.approx(
        (output + output + TEMPORARY_BYTES) / (2 * output), rel=0.1
    )
    name, size = frame.loc["jax-cumsum", "mem_temporaries"][0]  # the name is XLA's choice
    assert size == output
    markdown = render_markdown(build([run]))
    assert "memory (x min)" in markdown and "Memory (per call):" in markdown
    assert f"{name} 16 MB" in markdown
    assert "jax-cumsum: XLA plans 17.1 MB of temporaries, 0.5x the minimum" in markdown
    assert "Memory per call" in render_html(build([run]))  # one size: one bar per backend
    plot = memory_vs_size(records_frame([run]), "allocates")
    assert "numpy-temporary" in plot.caption  # grows the most


class _RecordingLibc:
    """glibc's allocator calls, recorded."""

    def __init__(self):
        self.calls = []

    def mallopt(self, option, value):
        self.calls.append(("mallopt", option, value))
        return 1

    def malloc_trim(self, pad):
        self.calls.append(("malloc_trim", pad))
        return 1


def test_the_memory_probe_undoes_its_allocator_settings(monkeypatch):
    libc = _RecordingLibc()
    monkeypatch.setattr(memory, "_glibc", lambda: libc)
    with pytest.raises(RuntimeError), memory.freed_memory_visible() as released:
        assert released
        assert ("mallopt", memory.M_MMAP_THRESHOLD, 128 * 1024) in libc.calls
        raise RuntimeError("a failing probe restores the allocator too")
    restored = [call[1:] for call in libc.calls[-len(memory.RESTORED) :]]
    assert dict(restored) == memory.RESTORED


def test_a_call_timed_after_counting_is_not_slowed_by_the_memory_probe():
    """The probe maps every buffer above 128 KiB afresh while it measures; a process that
    times after counting (pytest-benchmark tests, `compare`) must not keep that: measured,
    a 0.15 ms TDMA call timed at 1.2 ms after another test's counting (487 page faults per
    call). Page faults per call are a count: after counting, the call reuses its buffers.
    The median call, not the mean: a warm process still faults a buffer afresh now and
    then (measured, 8 runs of 20 calls: 0 in most calls, bursts of 195-597 in 0-4 of them,
    means 0-90 per call), while the bug faulted every call."""
    import resource
    import statistics

    import jax

    scenario = bundled("tridiagonal")
    size = scenario.size("smoke")
    backend = scenario.backend("scanned-time-major")
    with jax.enable_x64(True):
        prepared = backend.prepare(scenario.make_inputs(size, 0, "float64"), size)
        other = scenario.backend("sequential-numpy")
        counts_per_call(scenario, other, size, None, 0, "float64", device_info())
        for _ in range(3):
            call_and_wait(backend.run, prepared)
        faults = []
        for _ in range(20):
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            call_and_wait(backend.run, prepared)
            faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    output_pages = size["n"] * size["batch"] * 8 // 4096  # 195: the output alone
    assert statistics.median(faults) < output_pages / 4, f"page faults per call: {faults}"


def _backend_of(run):
    from scanbench import Backend, Strategy

    return Backend(
        name="leaky", strategy=Strategy.VMAPPED, engine="jax", prepare=lambda i, s: i, run=run
    )


def test_a_function_that_keeps_device_arrays_between_calls_is_found():
    """A function that appends each call's result to a Python list: the arrays it keeps
    alive grow by the same bytes every call; one that keeps nothing does not grow, nor
    one that fills a cache once."""
    import jax.numpy as jnp

    from scanbench.probes.passes import call_memory

    x = jnp.ones(1000, jnp.float32)
    kept: list = []

    def leaky(prepared):
        kept.append(prepared * 2.0)
        return prepared + 1.0

    growth = call_memory(_backend_of(leaky), x, "cpu", None, None)["live_growth"]
    assert growth == {"bytes_per_call": 4000, "arrays_per_call": 1}
    clean = call_memory(_backend_of(lambda p: p + 1.0), x, "cpu", None, None)
    assert "live_growth" not in clean
    cache: dict = {}

    def cached(prepared):
        cache.setdefault("table", prepared * 3.0)  # filled by the first call only
        return prepared + 1.0

    assert "live_growth" not in call_memory(_backend_of(cached), x, "cpu", None, None)

"""The markdown table: derived columns from stored values, failed cells listed."""

from __future__ import annotations

from scanbench.api import Record
from scanbench.invocation import Invocation, ScenarioFacts
from scanbench.reports.markdown import render
from scanbench.reports.model import build
from scanbench.results import Run
from scanbench.units import format_seconds


def record(backend, status="ok", median=None, error=None):
    stats = {"median": median, "iqr": 0.0, "count": 3} if median else {}
    return Record(
        scenario="tridiagonal",
        backend=backend,
        strategy="scanned",
        engine="jax",
        size="smoke",
        dtype="float64",
        seed=0,
        status=status,
        error=error,
        device={"platform": "cpu", "device_kind": "cpu"},
        work={"systems": 1000.0, "bytes": 4e6},
        stats=stats,
        prepare_s=0.5,
    )


def run_of(*records):
    env = {"hostname": "box", "memory_bandwidth": {"bytes_per_s": 1e10}}
    return Run(env, Invocation({"tridiagonal": ScenarioFacts("", "systems", None)}), records)


def test_ratios_and_throughput():
    text = render(build([run_of(record("fast", median=1e-3), record("slow", median=4e-3))]))
    rows = {
        line.split("|")[1].strip(): line
        for line in text.splitlines()
        if "| fast" in line or "| slow" in line
    }
    fast, slow = rows["fast"], rows["slow"]
    assert "1.00" in fast and "4.00" in slow  # x fastest
    assert "| 1 M " in fast and "| 250 k " in slow  # systems/s
    # bound = 4e6 B / 1e10 B/s = 0.4 ms: 1 ms is 2.5x the bound, 4 ms is 10x
    assert "| 2.5 " in fast and "| 10 " in slow
    assert "box" in text


def test_all_failed_cells_render():
    text = render(
        build([run_of(record("a", "failed", error="MismatchError: off\nTraceback-line"))])
    )
    assert "**a** failed: MismatchError: off" in text and "Traceback-line" not in text


def test_format_seconds():
    assert format_seconds(2.5) == "2.5 s"
    assert format_seconds(0.0012) == "1.2 ms"
    assert format_seconds(3.4e-6) == "3.4 us"
    assert format_seconds(None) == "-"

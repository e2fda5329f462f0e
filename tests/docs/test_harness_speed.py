"""The benchmark of the harness's own speed (`docs/harness_speed.py`, ``nox -s perf``):
its commands timed from outside, a run's wall time split by the lines it prints."""

from __future__ import annotations

import sys

from tests.support.paths import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "docs"))

import harness_speed  # docs/, on the path above

PRINTS = (
    "import sys, time\n"
    "print('environment', file=sys.stderr, flush=True); time.sleep(0.3)\n"
    "print('[1/2] toy/a/smoke/float64: running', file=sys.stderr, flush=True)\n"
    "time.sleep(0.3)\n"
    "print('[1/2] toy/a/smoke/float64: ok, median 1 us', file=sys.stderr, flush=True)\n"
    "print('[2/2] toy/b/smoke/float64: failed: boom', file=sys.stderr, flush=True)\n"
    "time.sleep(0.3); print('report written')\n"
)
# each line is dated when its reader thread gets it; 0.3 s apart, the checks below allow
# 0.1 s of a reader's lag on a busy machine


def test_a_run_is_split_by_the_lines_it_prints():
    result = harness_speed.timed([sys.executable, "-c", PRINTS])
    assert result["returncode"] == 0 and result["wall_s"] >= 0.9
    assert [text for _, _, text in result["lines"]][-1] == "report written"
    split = harness_speed.run_split(result)
    assert list(split) == ["start-up and environment", "cells", "reports"]
    assert split["start-up and environment"] >= 0.2 and split["cells"] >= 0.2
    assert split["reports"] >= 0.2
    assert abs(sum(split.values()) - result["wall_s"]) < 1e-9


def test_a_pytest_part_names_the_tests_that_failed(monkeypatch):
    lines = [
        "..F.",
        "FAILED tests/x.py::test_y[a] - AssertionError: no",
        "ERROR tests/x.py::test_z - RuntimeError",
        "1 failed, 3 passed, 1 error, 1 rerun in 2.00s",
    ]
    result = {"returncode": 1, "wall_s": 2.0, "load_before": [0], "load_after": [0]}
    result["lines"] = [(0.0, "out", text) for text in lines]
    monkeypatch.setattr(harness_speed, "timed", lambda command: result)
    part = harness_speed.pytest_part("solo", [])
    assert part["failures"] == [
        ["FAILED", "tests/x.py::test_y[a]"],
        ["ERROR", "tests/x.py::test_z"],
    ]
    assert part["outcome"] == {"failed": 1, "passed": 3, "error": 1, "rerun": 1}


def test_the_figure_names_each_job_its_split_and_the_load():
    run = {"returncode": 0, "wall_s": 61.0, "load_before": [0.1], "load_after": [1.9]}
    tests = {"returncode": 0, "wall_s": 200.0, "load_before": [0.2], "load_after": [2.0]}
    data = {
        "measured_at": "2026-11-27T12:00:00+00:00",
        "commit": "0123456789abcdef",
        "machine": {"cpu_model": "AMD EPYC", "cpu_count": 2},
        "parts": {
            "smoke": {
                **run,
                "split_s": {"start-up and environment": 4.0, "cells": 50.0, "reports": 7.0},
                "cells": 33,
                "failed": 0,
                "disturbed": 2,
                "stages_s": {"prepare: compile": 40.0, "sampling": 20.0},
            },
            "tests": {
                "not solo": {**tests, "outcome": {"passed": 600, "skipped": 40}},
                "solo": {
                    **tests,
                    "wall_s": 50.0,
                    "outcome": {"passed": 5, "failed": 1},
                    "failures": [["FAILED", "tests/a.py::test_b"]],
                },
                "wall_s": 250.0,
            },
        },
    }
    text = harness_speed.render(data)
    assert "| `scanbench run --size smoke` (every scenario, reports) | 1 min 01 s |" in text
    assert "cells 50.0 s" in text and "33 cells, 0 failed, 2 still disturbed" in text
    assert "[0.1] / [1.9]" in text
    assert "not solo 3 min 20 s (600 passed); solo 50.0 s (5 passed, 1 failed:" in text
    assert "`tests/a.py::test_b`" in text  # a failure is named, never hidden in a count
    assert "| prepare: compile | 40.0 s |" in text
    assert "AMD EPYC (2 cores), commit 0123456789ab, 2026-11-27T12:00:00+00:00" in text

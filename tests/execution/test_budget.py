"""The main job in minutes: a per-cell time budget, costly backends measured on part of
the work and scaled (openly), and progress lines while a cell runs."""

from __future__ import annotations

import dataclasses
import json
import math
import time

import pytest

from scanbench.cells import Cell
from scanbench.execution.heartbeat import Beacon, heartbeat, read_phase
from scanbench.execution.quiet_link import Pauses
from scanbench.execution.worker import run_cell
from scanbench.invocation import Invocation, ScenarioFacts
from scanbench.reports.frame import records_frame
from scanbench.reports.markdown import render as render_markdown
from scanbench.reports.model import build
from scanbench.results import Run
from scanbench.sampling import TimingConfig
from scanbench.stages import (
    CHECK_STAGE,
    COMPILE_STAGE,
    FIRST_CALL_STAGE,
    INPUTS_STAGE,
    PAUSED_STAGE,
    REFERENCE_STAGE,
)
from scanbench.units import format_duration
from tests.support.paths import SCENARIO_FILES
from tests.support.scenario_files.steps import COMPILE_S, STEP_S

STEPS = str(SCENARIO_FILES / "steps.py")
BUDGET = TimingConfig(warmup=0, min_time_s=0.0, min_count=3, max_time_s=0.1)


def _cell(backend: str, size: str = "smoke") -> Cell:
    return Cell("steps", backend, size, "float64", 0, STEPS)


def test_a_costly_backend_is_measured_on_part_of_the_work_and_scaled():
    record = run_cell(_cell("sleepy"), BUDGET, probes=False)
    assert record.status == "ok", record.error
    scaled = record.sampling["scaled"]
    assert scaled["along"] == "steps" and scaled["measured"] == 2 and scaled["full"] == 10
    assert scaled["factor"] == 5.0
    # the raw samples are of the 2-step call; the stored statistics are scaled to 10 steps
    assert all(2 * STEP_S <= s < 4 * STEP_S for s in record.samples_s)
    assert 10 * STEP_S <= record.stats["median"] < 20 * STEP_S
    # the budget holds 2 or 3 of the part's calls; it takes the 6 an interval needs
    assert record.stats["count"] == len(record.samples_s) >= 6
    assert record.stats["ci_low"] <= record.stats["median"] <= record.stats["ci_high"]
    assert record.size_params == {"steps": 10}  # reported at the size it stands for
    phases = record.extra["phases_s"]  # where the cell's time went, stage by stage
    assert phases["sampling"] >= sum(record.samples_s)
    # prepare in its parts: the checked first call, at 2 steps, is a stage of its own
    assert phases[FIRST_CALL_STAGE] >= 2 * STEP_S
    assert {INPUTS_STAGE, REFERENCE_STAGE, COMPILE_STAGE, CHECK_STAGE} <= set(phases)
    assert phases[COMPILE_STAGE] >= record.prepare_s > 0
    assert sum(phases.values()) <= record.wall_s


def test_a_cheap_backend_is_measured_whole_and_counted_exactly():
    record = run_cell(_cell("quick"), BUDGET, probes=True)
    assert record.status == "ok", record.error
    assert "scaled" not in record.sampling
    assert record.counts.scale == 1.0


def test_a_backend_slow_only_on_its_first_call_is_measured_whole():
    """Its first reduced call (a compile: 0.3 s x 5 > the 0.1 s budget) would predict a
    costly call; its warm reduced calls do not, so the whole call is measured: exact."""
    record = run_cell(_cell("compiles-first"), BUDGET, probes=False)
    assert record.status == "ok", record.error
    assert "scaled" not in record.sampling
    assert record.size_params == {"steps": 10} and record.stats["median"] < COMPILE_S


def test_a_backend_whose_minimum_samples_would_overrun_the_budget_is_scaled():
    """A whole call of 10 x 20 ms = 0.2 s fits a 0.5 s budget, but its 3 samples do not
    (0.6 s): measured on 2 steps and scaled. With 0.7 s the 3 whole calls fit: whole."""
    tight = dataclasses.replace(BUDGET, max_time_s=0.5)
    record = run_cell(_cell("sleepy"), tight, probes=False)
    assert record.status == "ok", record.error
    assert record.sampling["scaled"]["factor"] == 5.0
    roomy = dataclasses.replace(BUDGET, max_time_s=0.7)
    record = run_cell(_cell("sleepy"), roomy, probes=False)
    assert record.status == "ok", record.error
    assert "scaled" not in record.sampling and record.stats["median"] >= 10 * STEP_S


def test_a_small_size_is_not_reduced():
    record = run_cell(_cell("sleepy", "default"), BUDGET, probes=False)
    assert record.status == "ok" and "scaled" not in record.sampling


def test_a_scaled_cell_is_counted_exactly_by_the_linear_model_when_it_can_be():
    record = run_cell(_cell("sleepy"), BUDGET, probes=True)
    assert "scaled" in record.sampling
    assert record.counts.scale == 1.0


def test_a_scaled_cell_too_small_for_the_linear_model_is_counted_whole():
    """Timed on 2 of 4 steps and scaled x2, but counted on the whole call: 4 per-step
    dispatches + 2 at the end = 6 (the reduced call's 4 x 2 would say 8)."""
    budget = TimingConfig(warmup=0, min_time_s=0.0, min_count=3, max_time_s=0.05)
    record = run_cell(_cell("sleepy-jax", "four"), budget, probes=True)
    assert record.status == "ok", record.error
    assert record.sampling["scaled"]["factor"] == 2.0
    assert record.counts.scale == 1.0
    assert record.counts.trace["dispatches"] == 4 + 2
    assert "linear" not in record.counts.sections  # counted directly: no parts
    parted = run_cell(_cell("sleepy-jax", "four"), budget, probes=True, count_parts=True)
    assert parted.counts.trace["dispatches"] == 6
    assert parted.counts.linear["model"]["trace.dispatches"] == [2, 1]  # 2 + 1 x steps


def test_reports_mark_scaled_cells_and_show_precision():
    sleepy = run_cell(_cell("sleepy"), BUDGET, probes=False)
    quick = run_cell(_cell("quick"), BUDGET, probes=False)
    records = (  # as if the first call had taken over a second
        dataclasses.replace(sleepy, sampling={**sleepy.sampling, "warmup_skipped": True}),
        quick,
    )
    run = Run({}, Invocation({"steps": ScenarioFacts("", "steps", None)}), records)
    frame = records_frame([run])
    sleepy = frame[frame["backend"] == "sleepy"].iloc[0]
    assert sleepy["scale"] == 5.0
    assert min(sleepy["samples_s"]) >= 10 * STEP_S  # ties compare whole-work samples
    markdown = render_markdown(build([run]))
    assert "≈ " in markdown
    assert "≈ measured on 2 of 10 steps and scaled x5" in markdown
    run_time = markdown.split("## Where the run's time went", 1)[1]
    assert "| sampling " in run_time and "(steps/sleepy/smoke)" in run_time
    assert "(±" in markdown or "no interval" in markdown
    assert "no warm-up call**: the checked first call took over 1 s and warmed up (sleepy)" in (
        markdown
    )


def test_beacon_throttles_sample_updates(tmp_path):
    now = [0.0]
    beacon = Beacon(tmp_path / "progress.txt", clock=lambda: now[0])
    beacon.phase("checking")
    beacon.samples(1)  # within a second of the last write: skipped
    assert read_phase(tmp_path / "progress.txt") == "checking"
    now[0] = 2.0
    beacon.samples(7)
    assert read_phase(tmp_path / "progress.txt") == "sampling: 7 samples"
    assert read_phase(tmp_path / "missing.txt") == "starting"


def test_beacon_adds_up_stage_times(tmp_path):
    now = [10.0]
    beacon = Beacon(tmp_path / "progress.txt", clock=lambda: now[0])
    beacon.stage("prepare and check", "preparing")
    assert read_phase(tmp_path / "progress.txt") == "preparing"
    now[0] = 12.5
    beacon.stage("sampling")
    now[0] = 13.0
    beacon.stage("prepare and check")  # a stage entered twice adds up
    now[0] = 13.25
    beacon.stop()
    beacon.stop()  # nothing running: no change
    assert beacon.stages == {"prepare and check": 2.75, "sampling": 0.5}


def test_a_stage_that_began_before_the_beacon_is_added_with_its_pauses_left_out(tmp_path):
    now = [5.0]
    pauses = tmp_path / "pauses.json"
    pauses.write_text(json.dumps([[1.0, 1.5]]))  # the runner stopped the worker meanwhile
    beacon = Beacon(None, clock=lambda: now[0], pauses=Pauses(pauses))
    beacon.ended("worker imports", 0.5)  # the imports, from before the beacon existed
    assert beacon.stages == {"worker imports": 4.0, PAUSED_STAGE: 0.5}


def test_heartbeat_emits_lines_while_the_block_runs(tmp_path):
    progress = tmp_path / "progress.txt"
    progress.write_text("sampling: 3 samples")
    lines: list[str] = []
    with heartbeat("toy/cell", progress, lines.append, every_s=0.05):
        time.sleep(0.3)
    assert len(lines) >= 3
    assert lines[0].startswith("  ... toy/cell: running for ") and "sampling: 3" in lines[0]


@pytest.mark.parametrize(
    "seconds, text", [(4.25, "4.2 s"), (65, "1 min 05 s"), (3725, "1 h 02 min")]
)
def test_durations_read_as_wall_clock(seconds, text):
    assert format_duration(seconds) == text


def test_a_run_prints_progress_lines_when_stderr_is_not_a_terminal(capsys):
    from scanbench.execution.launcher import run_cells

    def run_one(cell, emit):
        emit("  ... heartbeat")
        return run_cell(cell, BUDGET, probes=False)

    run_cells([_cell("quick"), _cell("quick", "default")], run_one, False)
    err = capsys.readouterr().err
    assert "[1/2] steps/quick/smoke/float64: running" in err
    assert "  ... heartbeat" in err
    assert "about" in err and "left" in err  # an ETA after the first cell


def test_count_parts_is_passed_to_the_workers_and_kept_for_resume(tmp_path):
    from scanbench.cli.main import main
    from scanbench.results import load_run

    out = tmp_path / "parts.json"
    argv = ["run", "--scenario-file", STEPS, "--backend", "sleepy-jax", "--size", "four"]
    argv += ["--max-time", "0.05", "--count-parts", "--quiet", "--out", str(out)]
    assert main(argv) == 0
    run = load_run(out)
    (record,) = run.records
    assert record.counts.linear["model"]["trace.dispatches"] == [2, 1]
    assert run.invocation.plan.count_parts
    stored = {**run.invocation.to_json(), "count_parts": False}
    assert not Invocation.from_json(stored).plan.count_parts


def test_counts_only_cells_run_side_by_side_and_come_back_in_order(capsys):
    from scanbench.execution.launcher import count_cells

    cells = [_cell("sleepy-jax", "four"), _cell("quick"), _cell("sleepy-jax", "default")]
    records = count_cells(cells, timeout_s=120, jobs=2)
    assert [r.key for r in records] == [c.key for c in cells]
    assert all(r.status == "ok" and not r.samples_s for r in records)  # counted, not timed
    assert [r.counts.trace["dispatches"] for r in (records[0], records[2])] == [6, 4]
    assert "counting 3 cells, 2 at a time (counts only: not timed)" in capsys.readouterr().err


def test_count_parts_without_probes_is_refused_in_one_line(tmp_path, capsys):
    from scanbench.cli.main import main

    argv = ["run", "--scenario-file", STEPS, "--count-parts", "--no-probes"]
    assert main([*argv, "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "--count-parts" in err and "--no-probes" in err and err.count("\n") == 1
    assert not (tmp_path / "r.json").exists()


def test_a_cell_measured_whole_after_its_part_is_judged_over_its_whole_samples(
    tmp_path, monkeypatch
):
    """Through a real run's cells: ``compiles-first`` is measured on 2 of its 10 steps,
    then whole (its warm calls are quick). The runner's calibration probe is planted to
    take 3x as long across the whole call's samples only: the cell is judged by the
    probes around those (disturbed, drift 3x), not by those around the part's samples,
    whose end closed the runner's watch before `Beacon.anew` reopened it."""
    from scanbench.cells import Selection
    from scanbench.execution import interference, overlap, runner
    from scanbench.results import load_run
    from scanbench.sources import file_source

    for threshold in ("OTHERS", "STEAL_FRACTION"):  # a parallel test run's load and steal
        monkeypatch.setattr(interference, threshold, math.inf)
    probes = iter([1.0, 1.0, 1.0, 3.0])  # the part's sampling, then the whole one's
    monkeypatch.setattr(overlap, "calibration_probe", lambda: next(probes, 1.0))
    selection = Selection((file_source(STEPS),), ("compiles-first",), ("smoke",), seed=0)
    timing = TimingConfig(warmup=0, min_time_s=0.0, min_count=20, max_time_s=5.0)
    invocation = runner.plan(selection, timing=timing, probes=False, remeasure=0)
    out = tmp_path / "steps.json"
    runner.execute(invocation, out, {"platform": "cpu"})
    (cell,) = load_run(out).records
    assert cell.status == "ok", cell.error
    assert "scaled" not in cell.sampling and cell.size_params == {"steps": 10}
    judged = cell.interference
    assert (judged["probe_before_s"], judged["probe_after_s"]) == (1.0, 3.0), judged
    assert judged["disturbed"]
    assert judged["reasons"][0].startswith("the calibration probe took 3.00x"), judged

"""A disturbed cell is measured again; a cell whose samples had a slow spell is disturbed,
shown so in the reports, and the gate does not decide on it."""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys
import time

import pytest

from scanbench.api import Record
from scanbench.cells import Selection
from scanbench.execution import interference, launcher, runner
from scanbench.execution.interference import Interference, SetAside, with_slow_spell
from scanbench.execution.remeasure import SET_ASIDE_STAGE, remeasured
from scanbench.reports import markdown
from scanbench.reports.model import build
from scanbench.results import load_run
from scanbench.sources import file_source
from tests.support.paths import SCENARIO_FILES
from tests.support.planted_spell import found_where_planted
from tests.support.scenario_files import spells as planted

SPELLS = str(SCENARIO_FILES / "spells.py")
CLEAN = Interference(probe_before_s=0.005, probe_after_s=0.005, cores=2)


def record(samples: tuple[float, ...], interference: Interference, **fields) -> Record:
    base = {"scenario": "s", "backend": "b", "strategy": "sequential", "engine": "numpy"}
    base |= {"size": "smoke", "dtype": "float64", "seed": 0, "status": "ok"}
    return Record(
        samples_s=samples,
        stats={"median": sorted(samples)[len(samples) // 2]} if samples else {},
        interference=interference.to_json(),
        extra={"phases_s": {"sampling": 0.5, "counting": 0.25}},
        **{**base, **fields},
    )


STEADY = tuple(1e-3 * (1 + 0.01 * (i % 3)) for i in range(40))
SPELL = STEADY[:10] + tuple(2 * t for t in STEADY[10:20]) + STEADY[20:]
DISTURBED = record(SPELL, with_slow_spell(CLEAN, SPELL, seed=0))
UNDISTURBED = record(STEADY, with_slow_spell(CLEAN, STEADY, seed=0))


def scripted(*records: Record):
    """A ``measure_once(left)`` that returns ``records`` in turn, and the budget each call
    was given (how often it was called)."""
    calls = []

    def measure_once(left: int) -> Record:
        calls.append(left)
        return records[len(calls) - 1]

    return measure_once, calls


def resampled_in_worker(kept: Record, times: int) -> Record:
    """``kept`` as its worker returns it after setting ``times`` spelled samplings aside."""
    aside = tuple(SetAside("ok", None, Interference(), SPELL, 1e-3, 0.04) for _ in range(times))
    verdict = dataclasses.replace(Interference.from_json(kept.interference), set_aside=aside)
    return dataclasses.replace(kept, interference=verdict.to_json())


def test_a_slow_spell_makes_a_cell_disturbed_with_its_extent():
    spell = Interference.from_json(DISTURBED.interference).slow_spell
    assert DISTURBED.disturbed and (spell.first, spell.last, spell.samples) == (10, 19, 40)
    assert DISTURBED.interference["reasons"] == [spell.describe()]
    assert DISTURBED.interference["slow_spell"]["share"] == 0.25
    assert not UNDISTURBED.disturbed and UNDISTURBED.interference["slow_spell"] is None


def test_a_disturbed_cell_is_measured_again_and_the_first_undisturbed_kept():
    lines = []
    measure_once, calls = scripted(DISTURBED, UNDISTURBED, DISTURBED)
    kept = remeasured(measure_once, 2, lines.append)
    assert calls == [2, 1] and kept.samples_s == STEADY and not kept.disturbed
    (aside,) = Interference.from_json(kept.interference).set_aside
    assert aside.samples_s == SPELL and aside.median_s == DISTURBED.stats["median"]
    assert aside.interference.slow_spell.first == 10 and aside.wall_s == 0.75
    assert kept.extra["phases_s"][SET_ASIDE_STAGE] == 0.75
    assert lines == [f"s/b/smoke: disturbed ({DISTURBED.interference['reasons'][0]}); "
                     "sampled 1 time, measuring it again in a fresh worker (at most 3 "
                     "samplings)"]  # fmt: skip


def test_a_cell_disturbed_every_time_keeps_its_quietest_measurement_marked():
    calm = STEADY[:30] + tuple(2 * t for t in STEADY[30:35]) + STEADY[35:]  # 5 of 40 slow
    quieter = record(calm, with_slow_spell(CLEAN, calm, seed=0))
    measure_once, calls = scripted(DISTURBED, quieter, DISTURBED, UNDISTURBED)
    kept = remeasured(measure_once, 2)
    assert calls == [2, 1, 0] and kept.disturbed and kept.samples_s == calm
    assert [a.samples_s for a in Interference.from_json(kept.interference).set_aside] == [
        SPELL,
        SPELL,
    ]


def test_the_budget_counts_every_sampling_in_the_workers_and_the_fresh_ones():
    """--remeasure 3: the first worker sampled again twice in itself, so one sampling is
    left: one fresh worker, which may not sample again in itself; 4 samplings in all."""
    lines = []
    first = resampled_in_worker(DISTURBED, 2)
    measure_once, calls = scripted(first, DISTURBED, UNDISTURBED)
    kept = remeasured(measure_once, 3, lines.append)
    assert calls == [3, 0] and kept.disturbed
    assert len(Interference.from_json(kept.interference).set_aside) == 3
    assert "sampled 3 times, measuring it again in a fresh worker (at most 4" in lines[0]
    # its budget spent inside its worker: never a fresh worker
    measure_once, calls = scripted(resampled_in_worker(DISTURBED, 3), UNDISTURBED)
    assert remeasured(measure_once, 3).samples_s == SPELL and calls == [3]


def test_a_first_measurement_taken_earlier_is_measured_again_with_its_budget_left():
    """The run measures the disturbed cells again after the others: `remeasured` gets the
    first record and spends what its worker left of the budget."""
    measure_once, calls = scripted(UNDISTURBED)
    kept = remeasured(measure_once, 2, first=resampled_in_worker(DISTURBED, 1))
    assert calls == [0] and not kept.disturbed
    assert len(Interference.from_json(kept.interference).set_aside) == 2


def test_a_measurement_again_that_fails_keeps_the_one_before_and_the_failure():
    failed = record((), CLEAN, status="failed", error="TimeoutError: cell timed out")
    measure_once, calls = scripted(DISTURBED, failed)
    kept = remeasured(measure_once, 2)
    assert len(calls) == 2 and kept.samples_s == SPELL and kept.disturbed
    (aside,) = Interference.from_json(kept.interference).set_aside
    assert aside == SetAside("failed", "TimeoutError: cell timed out", CLEAN, (), None, 0.75)


def test_only_a_disturbed_timed_cell_is_measured_again():
    failed = record((), CLEAN, status="failed", error="boom")
    for first in (UNDISTURBED, failed, dataclasses.replace(DISTURBED, samples_s=())):
        measure_once, calls = scripted(first, UNDISTURBED)
        assert remeasured(measure_once, 2) is first and len(calls) == 1
    measure_once, calls = scripted(DISTURBED, UNDISTURBED)
    assert remeasured(measure_once, 0) is DISTURBED and len(calls) == 1


BUSY = dataclasses.replace(CLEAN, runnable_mean=3.0, others_mean=1.0, load_samples=10)


def busy_record(samples: tuple[float, ...]) -> Record:
    interference = dataclasses.replace(BUSY, disturbed=True, reasons=("3.0 runnable tasks",))
    return record(samples, interference)


def test_a_cell_is_not_measured_again_while_the_programs_that_disturbed_it_still_run():
    lines, asked = [], []

    def still_busy(interference):
        asked.append(interference)
        return "not measured again: the machine was still busy after it (1.0 ...)"

    measure_once, calls = scripted(busy_record(STEADY), UNDISTURBED)
    kept = remeasured(measure_once, 2, lines.append, still_busy)
    assert len(calls) == 1 and kept.disturbed and asked[0].others_mean == 1.0
    assert kept.interference["reasons"] == [
        "3.0 runnable tasks",
        "not measured again: the machine was still busy after it (1.0 ...)",
    ]
    assert lines == [f"s/b/smoke: disturbed ({'; '.join(kept.interference['reasons'])})"]
    measure_once, calls = scripted(busy_record(STEADY), UNDISTURBED)  # the load is gone
    kept = remeasured(measure_once, 2, None, lambda i: None)
    assert len(calls) == 2 and kept.samples_s == STEADY and not kept.disturbed


def test_the_load_that_persists_is_found_among_other_programs_only(tmp_path, monkeypatch):
    """A busy loop that is not of the run (not a descendant of ``root``) makes the
    machine still busy; the same loop counted as the run's own worker does not; a cell
    disturbed by a slow spell alone is measured again whatever runs. (Every task seen is
    named: under a parallel test run, other busy ``python`` tasks with lower pids would
    fill the few names a reason gives, and push the spinner out of it.)"""
    monkeypatch.setattr(interference, "NAMED_OTHERS", 1000)
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    outsider = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.2)
        why = interference.still_busy(BUSY, root=outsider.pid, samples=6)
        assert why is not None and f"python (pid {spinner.pid}) in" in why, why
        own = interference.still_busy(BUSY, root=os.getpid(), samples=6)
        assert own is None or f"(pid {spinner.pid})" not in own, own  # other load may run
        spell_only = with_slow_spell(CLEAN, SPELL, seed=0)
        assert interference.still_busy(spell_only, root=outsider.pid) is None
    finally:
        spinner.kill()
        outsider.kill()


def _planted_run(tmp_path, size_name: str, remeasure: int, backend: str = "planted"):
    """The ``planted`` backend (or ``backend``) at ``size_name`` through a real run's cells."""
    size = planted.SCENARIO.size(size_name)
    selection = Selection((file_source(SPELLS),), (backend,), (size_name,), seed=1)
    invocation = runner.plan(
        selection,
        timing=planted.timing(size["samples"]),
        timeout_s=120,
        probes=False,
        remeasure=remeasure,
    )
    out = tmp_path / "spells.json"
    runner.execute(invocation, out, {"platform": "cpu"})  # the environment: not needed
    run = load_run(out)
    (cell,) = run.records
    return run, cell, planted.window(size["samples"], seed=1)


@pytest.mark.solo  # its second sampling must be steady: the other test worker's load may not be
def test_a_spell_is_sampled_again_in_its_worker_and_the_steady_samples_kept(tmp_path, monkeypatch):
    """Through the real run's cells: workers, the timing loop, the spell test in the worker
    and the runner. The ``planted`` backend slows itself 5x for a quarter of its first 40
    samples in a worker: the worker sets them aside and samples the call again, with no
    fresh worker, and the steady samples are kept, the spell stored with the cell. (The
    machine's own tests, the probe's drift, other programs' load and CPU steal, are turned
    off: under a parallel test run they flagged the cell, which is what they are for and
    is tested on its own, and its fresh worker hid the in-worker sampling this checks.)"""
    monkeypatch.setattr(launcher, "still_busy", lambda interference: None)
    for threshold in ("PROBE_DRIFT", "OTHERS", "STEAL_FRACTION"):
        monkeypatch.setattr(interference, threshold, math.inf)
    run, cell, (first, last) = _planted_run(tmp_path, "obvious", remeasure=1)
    assert not cell.disturbed and len(cell.samples_s) == 40, cell.interference
    (aside,) = Interference.from_json(cell.interference).set_aside
    spell = aside.interference.slow_spell
    assert spell is not None and found_where_planted(spell, aside.samples_s, first, last)
    assert "sampled again in the same worker" in aside.interference.reasons[0]
    phases = cell.extra["phases_s"]
    assert phases[SET_ASIDE_STAGE] == sum(aside.samples_s)
    text = markdown.render(build([run]))
    assert "**planted**: measured 2 times; the numbers are of the last" in text
    assert "sampled again in the same worker" in text


@pytest.mark.solo  # both samplings must be free of a slow spell: the other test worker's load
def test_a_machine_disturbed_over_the_samples_is_sampled_again_in_its_worker(tmp_path, monkeypatch):
    """Through the real run's cells: the runner's calibration probe is planted to take 3x
    as long when the first sampling of a ``steady`` call ends, and the same before and
    after every later one. The runner answers the worker's end of its samples with
    "disturbed"; the worker sets them aside and samples again, holding the machine, with
    no fresh worker (it would compile again). The kept samples are judged over their own
    sampling; the set-aside one keeps the runner's verdict. (Other programs' load and
    CPU steal are turned off: a parallel test run would flag the cell for them.)"""
    from scanbench.execution import overlap

    monkeypatch.setattr(launcher, "still_busy", lambda interference: None)
    for threshold in ("OTHERS", "STEAL_FRACTION"):
        monkeypatch.setattr(interference, threshold, math.inf)
    probes = iter([1.0, 3.0])  # the first sampling's opening and closing probes
    monkeypatch.setattr(overlap, "calibration_probe", lambda: next(probes, 1.0))
    run, cell, _ = _planted_run(tmp_path, "smoke", remeasure=1, backend="steady")
    kept = Interference.from_json(cell.interference)
    assert not cell.disturbed and len(cell.samples_s) == 40, cell.interference
    assert (kept.probe_before_s, kept.probe_after_s) == (1.0, 1.0)
    (aside,) = kept.set_aside
    assert (aside.interference.probe_before_s, aside.interference.probe_after_s) == (1.0, 3.0)
    assert aside.interference.slow_spell is None and len(aside.samples_s) == 40
    (reason,) = aside.interference.reasons
    assert reason.startswith("the calibration probe took 3.00x"), reason
    assert reason.endswith("; sampled again in the same worker"), reason
    assert cell.extra["phases_s"][SET_ASIDE_STAGE] == sum(aside.samples_s)  # no worker again
    text = markdown.render(build([run]))
    assert "**steady**: measured 2 times; the numbers are of the last" in text


def test_a_spell_while_other_programs_still_run_is_not_sampled_again(tmp_path, monkeypatch):
    """Through the real run's cells: the ``planted`` backend's samples have a slow spell and
    the runner's probe is planted to drift 3x over them, while other programs are planted
    to run on after them (`still_busy`). The worker keeps its samples, slow spell and all:
    sampled again, they would be disturbed the same way. No sampling is set aside, no
    fresh worker started, and the reason says why."""
    from scanbench.execution import overlap

    busy = "not measured again: the machine was still busy after it (1.0 ...)"
    asked = []
    monkeypatch.setattr(overlap, "still_busy", lambda i: asked.append(i) or busy)
    monkeypatch.setattr(launcher, "still_busy", lambda i: busy if i.probe_after_s else None)
    for threshold in ("OTHERS", "STEAL_FRACTION"):
        monkeypatch.setattr(interference, threshold, math.inf)
    probes = iter([1.0, 3.0])
    monkeypatch.setattr(overlap, "calibration_probe", lambda: next(probes, 1.0))
    _, cell, _ = _planted_run(tmp_path, "recurring", remeasure=2)
    kept = Interference.from_json(cell.interference)
    assert cell.disturbed and kept.slow_spell is not None and not kept.set_aside, kept
    assert (kept.probe_before_s, kept.probe_after_s) == (1.0, 3.0) and len(asked) == 1
    assert kept.reasons[-1] == busy
    assert SET_ASIDE_STAGE not in cell.extra["phases_s"]


def test_a_run_measures_a_planted_spell_again_and_reports_it(tmp_path, monkeypatch):
    """Through the real run's cells: workers, the timing loop, the spell test in the runner.
    The ``planted`` backend slows itself 5x for a quarter of its 40 samples every time it
    is sampled, so the sampling again in its worker and the fresh worker (started after
    the run's other cells, with what is left of a budget of 3) are disturbed too, and the
    quieter worker's measurement is kept, marked, the three set aside stored in the order
    taken.
    (A parallel test run keeps the machine busy: the checks that would then skip sampling
    and measuring again are turned off, they are tested on their own.)"""
    from scanbench.execution import overlap

    monkeypatch.setattr(launcher, "still_busy", lambda interference: None)
    monkeypatch.setattr(overlap, "still_busy", lambda interference: None)
    run, cell, (first, last) = _planted_run(tmp_path, "recurring", remeasure=3)
    spell = Interference.from_json(cell.interference).slow_spell
    assert cell.disturbed and spell is not None, cell.samples_s
    assert found_where_planted(spell, cell.samples_s, first, last), (spell, first, last)
    # in the order taken: the first worker's sampling set aside in it, then the other
    # worker's, and the worker not kept (the quieter one is kept: which, load decides)
    entries = Interference.from_json(cell.interference).set_aside
    for aside in entries:
        assert aside.interference.slow_spell is not None and len(aside.samples_s) == 40
    again = ["sampled again in the same worker" in a.interference.reasons[0] for a in entries]
    assert again in ([True, True, False], [True, False, True]), entries
    (worker,) = [a for a, inside in zip(entries, again, strict=True) if not inside]
    assert not worker.interference.set_aside  # listed beside it, not inside
    assert cell.extra["phases_s"][SET_ASIDE_STAGE] > worker.wall_s > sum(worker.samples_s)
    share = Interference.from_json(cell.interference).slow_spell.length / 40
    assert share <= worker.interference.slow_spell.length / 40  # the quieter of the two
    text = markdown.render(build([run]))
    assert "(disturbed)" in text and f"slow spell: samples {spell.first + 1}-" in text
    assert "**planted**: measured 4 times; the numbers are of the quietest (also disturbed)" in (
        text
    )


def test_a_disturbed_cell_is_measured_again_after_the_runs_other_cells(
    tmp_path, monkeypatch, capsys
):
    """Through the real run: ``planted`` (a slow spell every time it is sampled) is
    measured again only once ``steady`` has had its first measurement, within its budget:
    with --remeasure 2, its worker samples again once and one fresh worker (which may not
    sample again in itself) is started; 3 samplings in all, as the progress line says."""
    from scanbench.execution import overlap

    monkeypatch.setattr(launcher, "still_busy", lambda interference: None)
    monkeypatch.setattr(overlap, "still_busy", lambda interference: None)
    for threshold in ("PROBE_DRIFT", "OTHERS", "STEAL_FRACTION"):  # a parallel test run's
        monkeypatch.setattr(interference, threshold, math.inf)  # load: tested on its own
    size = planted.SCENARIO.size("recurring")
    selection = Selection((file_source(SPELLS),), ("planted", "steady"), ("recurring",), seed=1)
    invocation = runner.plan(
        selection, timing=planted.timing(size["samples"]), timeout_s=120, probes=False,
        remeasure=2, overlap=False,
    )  # fmt: skip
    out = tmp_path / "spells.json"
    runner.execute(invocation, out, {"platform": "cpu"}, show_progress=False)
    lines = capsys.readouterr().err.splitlines()
    first_steady = next(i for i, line in enumerate(lines) if "/steady/" in line)
    # steady too may have had a slow spell on a busy machine: then 2 cells are measured again
    again = next(i for i, line in enumerate(lines) if line.startswith("measuring "))
    assert first_steady < again and "disturbed cell" in lines[again], lines
    assert "sampled 2 times, measuring it again in a fresh worker (at most 3 samplings)" in (
        "\n".join(lines[again:])
    )
    cell = next(r for r in load_run(out).records if r.backend == "planted")
    assert len(Interference.from_json(cell.interference).set_aside) == 2
    assert [r.backend for r in load_run(out).records] == ["planted", "steady"]

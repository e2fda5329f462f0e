"""Interference, ties and disturbed cells: recorded and flagged in reports."""

from __future__ import annotations

import collections
import dataclasses
import re

import numpy as np

from scanbench.execution.interference import (
    FAST_EVERY_S,
    MIN_LOAD_SAMPLES,
    PROBE_DRIFT,
    Interference,
    LoadSamples,
    OtherTask,
    assess,
    running_threads,
    sample_load,
)
from scanbench.gate.decide import paired_decision
from scanbench.gate.interleave import samples_per_block
from scanbench.gate.rules import Settings
from scanbench.reports import markdown
from scanbench.reports.frame import records_frame
from scanbench.reports.model import build
from scanbench.reports.tables import at_a_glance
from scanbench.results import Run, load_run
from tests.support.paths import DATA


def quiet(**kwargs) -> Interference:
    values = {
        "probe_before_s": 0.005,
        "probe_after_s": 0.0052,
        "samples": LoadSamples([1, 1, 2, 1, 1, 2], [0, 0, 1, 0, 0, 0]),
        "steal": ((1000, 0), (2000, 10)),
        "loads": (0.5, 0.9),
        "cores": 2,
        **kwargs,
    }
    return assess(**values)


def test_a_quiet_cell_is_not_disturbed():
    result = quiet()
    assert not result.disturbed and result.reasons == ()
    assert (
        result.steal_fraction == 0.01 and result.runnable_mean == 8 / 6 and result.load_samples == 6
    )
    assert Interference.from_json(result.to_json()) == result


def test_each_kind_of_interference_is_named():
    drifted = quiet(probe_after_s=0.005 * (PROBE_DRIFT + 0.1))
    assert drifted.disturbed and "calibration probe took 1.60x" in drifted.reasons[0]
    faster = quiet(probe_after_s=0.005 / (PROBE_DRIFT + 0.1))
    assert faster.disturbed
    crowded = quiet(samples=LoadSamples([3, 4, 3, 3, 4, 3], [2, 3, 2, 2, 3, 2]))
    assert (
        "3.3 runnable tasks on average for 2 cores (2.3 of them not this cell's)"
        in (crowded.reasons[0])
    )
    stolen = quiet(steal=((1000, 0), (2000, 100)))
    assert stolen.reasons == ("10% of CPU time stolen by the hypervisor",)


def test_a_cell_that_keeps_every_core_busy_itself_is_not_disturbed():
    """Two busy device threads of a sharded cell plus the odd background task: more tasks
    than cores, but the cell's own (measured: 2.0-2.2 runnable with 0.2 others)."""
    own = quiet(samples=LoadSamples([2, 3, 2, 2, 2], [0, 1, 0, 0, 0]))
    assert own.runnable_mean > 2 and not own.disturbed
    crowded = quiet(samples=LoadSamples([3] * 5, [1] * 5))  # a competing busy process
    assert crowded.disturbed and "1.0 of them not this cell's" in crowded.reasons[0]


SPIN_NAMED = (
    "import ctypes, ctypes.util, sys\n"
    "ctypes.CDLL(ctypes.util.find_library('c')).prctl(15, sys.argv[1].encode(), 0, 0, 0)\n"
    "while True: pass\n"
)


def test_the_sampler_sees_a_busy_process_and_names_the_others():
    """``own`` is the cell's worker, ``sb-other`` a program competing with it: the samples
    tell them apart and name the other with its pid, never the cell's own threads."""
    import subprocess
    import sys
    import time

    own, other = (
        subprocess.Popen([sys.executable, "-c", SPIN_NAMED, name])
        for name in ("sb-own", "sb-other")
    )
    try:
        time.sleep(0.3)  # both named and spinning
        samples = LoadSamples()
        with sample_load(own.pid, samples):
            time.sleep(1.0)
        assert len(samples.runnable) >= 0.5 / FAST_EVERY_S
        assert max(samples.runnable) >= 1 and running_threads(own.pid) == 1
        assert samples.seen[("sb-other", other.pid)] >= len(samples.runnable) // 2, samples.seen
        assert not [task for task in samples.seen if task[1] == own.pid]
    finally:
        for process in (own, other):
            process.kill()
            process.wait()


def test_a_few_load_samples_are_not_judged_and_the_others_are_named():
    """A stage of a few tenths of a second: one or two samples catching a kernel thread
    decided a mean (a quiet cell flagged with "4.0 runnable ... 3.0 not this cell's")."""
    few = quiet(samples=LoadSamples([4] * (MIN_LOAD_SAMPLES - 1), [3] * (MIN_LOAD_SAMPLES - 1)))
    assert not few.disturbed and few.runnable_mean == 4
    assert few.load_samples == MIN_LOAD_SAMPLES - 1
    seen = collections.Counter({("kworker/u8:3", 91): 6, ("rcu_preempt", 16): 2, ("a", 7): 1})
    seen[("b", 8)] = 1
    busy = quiet(samples=LoadSamples([4] * 6, [2] * 6, seen))
    assert busy.reasons == (
        "4.0 runnable tasks on average for 2 cores (2.0 of them not this cell's: "
        "kworker/u8:3 (pid 91) in 6 of 6 samples, rcu_preempt (pid 16) in 2 of 6 samples, "
        "a (pid 7) in 1 of 6 samples and 1 more)",
    )
    assert busy.others_seen[0] == OtherTask("kworker/u8:3", 91, 6)
    assert Interference.from_json(busy.to_json()) == busy


def disturbed_run() -> Run:
    run = load_run(DATA / "tdma.json")
    busy = quiet(samples=LoadSamples([3] * 5, [2] * 5)).to_json()
    records = tuple(
        dataclasses.replace(r, interference=busy) if r.backend == "scanned-time-major" else r
        for r in run.records
    )
    return Run(run.environment, run.invocation, records)


def test_reports_mark_disturbed_cells_with_their_reasons():
    text = markdown.render(build([disturbed_run()]))
    assert "(disturbed)" in text
    assert "- **scanned-time-major**: disturbed (3.0 runnable" in text


def test_ties_are_ties():
    run = load_run(DATA / "tdma.json")
    rng = np.random.default_rng(0)
    same = tuple(1e-3 * (1 + 0.05 * rng.standard_normal(30)))
    twin = tuple(1e-3 * (1 + 0.05 * rng.standard_normal(30)))
    slower = tuple(2e-3 * (1 + 0.05 * rng.standard_normal(30)))
    samples = {"scanned-time-major": same, "library-lax": twin, "scanned-issue": slower}
    records = []
    for r in run.records:
        if r.size == "smoke" and r.backend in samples:
            s = samples[r.backend]
            r = dataclasses.replace(r, samples_s=s, stats={**r.stats, "median": np.median(s)})
        elif r.size == "smoke" and r.status == "ok":
            s = tuple(np.array(slower) * 3)
            r = dataclasses.replace(r, samples_s=s, stats={**r.stats, "median": np.median(s)})
        records.append(r)
    frame = records_frame([Run(run.environment, run.invocation, tuple(records))])
    smoke = frame[(frame["size"] == "smoke") & (frame["status"] == "ok")]
    assert smoke["fastest"].sum() == 1
    tied = set(smoke.loc[smoke["tie"] | smoke["fastest"], "backend"])
    assert tied == {"scanned-time-major", "library-lax"}
    glance = at_a_glance(frame)
    names = glance.loc[glance["table"].str.contains("smoke"), "fastest backend"].iloc[0]
    assert names.endswith("(tie)") and {"scanned-time-major", "library-lax"} == set(
        names.removesuffix(" (tie)").split(" = ")
    )
    text = markdown.render(build([Run(run.environment, run.invocation, tuple(records))]))
    assert "## At a glance" in text
    assert re.search(r"\d tie\s*\|", text) and re.search(r"\d fastest\s*\|", text)


def test_detectable_slowdown_and_block_sizes():
    rng = np.random.default_rng(3)
    base = [list(1e-3 * (1 + 0.01 * rng.standard_normal(5))) for _ in range(30)]
    cand = [list(1e-3 * (1 + 0.01 * rng.standard_normal(5))) for _ in range(30)]
    decision = paired_decision(base, cand, 0.05, 10e-6, 0.99)
    assert not decision.suspect
    assert 1.05 < decision.detectable < 1.10
    assert decision.detectable == max(
        1.05 * decision.ratio / decision.low, 1 + 10e-6 / np.median([np.median(b) for b in base])
    )
    settings = Settings(samples_per_block=5, block_time_s=0.1)
    assert samples_per_block(settings, 0.3e-3) == 334
    assert samples_per_block(settings, 0.5) == 5
    assert samples_per_block(Settings(samples_per_block=5, block_time_s=0.0), 1e-6) == 5

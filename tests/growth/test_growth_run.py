"""A grown run end to end: ``scanbench run --grow`` (its options' one-line errors, then a
real sweep of backends of known cost) and ``compare(..., grow=...)``.

The known costs are busy loops on the thread's CPU clock (tests/support/scenario_files/
growing.py): loop 0.2 ms + 0.1 ms per item, batched 1 ms + 0.01 ms per item, crossing at
8.9 items. A busy machine only adds wall time (preemption), so the tolerances are one-sided
where that matters and generous: the fit and the crossover must land near the truth, not
on it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from scanbench import compare, report
from scanbench.api import InputError
from scanbench.cli.main import main
from scanbench.sampling import TimingConfig
from tests.support.paths import SCENARIO_FILES
from tests.support.scenario_files.growing import (
    BATCHED_FIXED_S,
    BATCHED_PER_ITEM_S,
    CROSSOVER,
    LOOP_FIXED_S,
    LOOP_PER_ITEM_S,
    batched,
    loop,
)

GROWING = str(SCENARIO_FILES / "growing.py")
QUICK = TimingConfig(warmup=0, min_time_s=0.05, min_count=5, max_time_s=0.2)


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--grow", "m=1..8"], "unknown axis 'm' for scenario 'growing'; choose one of: n"),
        (["--grow", "n=8..2"], "--grow 'n=8..2': START must be >= 1 and below STOP"),
        (["--grow", "n=1..8:x0.5"], "--grow 'n=1..8:x0.5': the factor after x must be"),
        (["--grow", "n"], "--grow 'n': expected AXIS=START..STOP[:POINTS|:xFACTOR]"),
        (["--grow", "n=1..8", "--grow-budget", "0"], "--grow-budget must be finite and > 0"),
        (["--grow", "n=1..8", "--grow-budget", "soon"], "--grow-budget must be a number"),
        (["--grow-budget", "2"], "--grow-budget applies to --grow"),
        (["--grow", "n=1..8", "--size", "smoke,default"], "--grow sweeps from one base size"),
        (["--grow", "n=1..8", "--grow", "n=2..4"], "axis 'n' is given twice"),
    ],
)
def test_a_bad_grow_option_is_one_line_and_exit_2(options, says, capsys, tmp_path):
    out = tmp_path / "grown.json"
    code = main(["run", "--scenario-file", GROWING, "--out", str(out), *options])
    error = capsys.readouterr().err.strip()
    assert code == 2 and says in error, error
    assert len(error.splitlines()) == 1 and not out.exists()


def _near(value: float, truth: float, low: float, high: float) -> bool:
    """``truth x low <= value <= truth x high``: a busy machine only adds time."""
    return truth * low <= value <= truth * high


@pytest.mark.slow
@pytest.mark.solo
def test_a_grown_run_fits_known_costs_and_confirms_their_crossover(tmp_path):
    """10 real cells: 4 points x 2 backends, then both at the predicted crossover."""
    out, md, html = tmp_path / "grown.json", tmp_path / "grown.md", tmp_path / "grown.html"
    command = [sys.executable, "-m", "scanbench.cli", "run", "--scenario-file", GROWING]
    command += ["--size", "smoke", "--grow", "n=1..64:x4", "--no-probes", "--quiet"]
    command += ["--min-time", "0.05", "--max-time", "0.3", "--timeout", "120"]
    command += ["--out", str(out), "--md", str(md), "--html", str(html)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    growth = json.loads(out.read_text())["invocation"]["growth"]
    assert growth["stage"] == "done"
    (analysis,) = growth["analysis"]
    fits = {line["label"]: line["fit"] for line in analysis["lines"]}
    if not fits["loop"]["exponent_fitted"]:  # (a point slowed by a busy machine can bend it)
        assert _near(fits["loop"]["per_unit_s"], LOOP_PER_ITEM_S, 0.8, 1.4)
        assert _near(fits["loop"]["fixed_s"], LOOP_FIXED_S, 0.5, 2.5)
    assert _near(fits["batched"]["fixed_s"], BATCHED_FIXED_S, 0.8, 1.4)
    # batched's per-item part is 0.64 ms of its 1.64 ms at the largest point: a point
    # slowed by 30% moves it 4x, so it is held to its order of magnitude only
    assert _near(fits["batched"]["per_unit_s"], BATCHED_PER_ITEM_S, 0.2, 6)
    (crossover,) = analysis["crossovers"]
    assert (crossover["below"], crossover["above"]) == ("loop", "batched")
    assert _near(crossover["at"], CROSSOVER, 0.7, 1.3)
    confirmation = crossover["confirmation"]  # measured by two added cells
    assert confirmation["at"] == crossover["confirm_at"] and confirmation["added"]
    sizes = {record["size"] for record in json.loads(out.read_text())["records"]}
    assert f"smoke@n={crossover['confirm_at']}" in sizes
    text = md.read_text()
    assert "## Growth: growing along n from smoke" in text
    assert f"batched beats loop from n >= {crossover['confirm_at']}" in text
    assert "data:image/svg+xml" in html.read_text()
    resume = [sys.executable, "-m", "scanbench.cli", "run", "--resume", str(out), "--quiet"]
    done = subprocess.run(resume, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "the grown run in" in done.stderr, done.stderr
    assert "is complete" in done.stderr


@pytest.mark.solo
def test_compare_grows_functions_fits_them_and_confirms_their_crossover(tmp_path):
    table = compare(
        {"loop": loop, "batched": batched},
        grow={"n": [1, 4, 16, 64]},
        args_for=lambda n: np.arange(float(n)),
        strategies={"batched": "vmapped"},
        timing=QUICK,
        probes=False,
    )
    assert list(table.index) == ["loop", "batched"]
    fits = {line.label: line.fit for line in table.attrs["growth"].lines}
    for n in (1, 4, 16):  # the fitted curves pass by the known costs
        assert _near(fits["loop"].at(n), LOOP_FIXED_S + LOOP_PER_ITEM_S * n, 0.8, 1.5)
        assert _near(fits["batched"].at(n), BATCHED_FIXED_S + BATCHED_PER_ITEM_S * n, 0.8, 1.5)
    assert table.loc["batched", "fixed_s"] == fits["batched"].fixed_s
    (crossover,) = table.attrs["growth"].crossovers
    assert _near(crossover.at, CROSSOVER, 0.7, 1.3)
    assert crossover.confirmation is not None and crossover.confirmation.added
    points = table.attrs["points"]
    assert set(points["n"]) == {1, 4, 16, 64, crossover.confirm_at}
    assert table.attrs["crossovers"][0].startswith("batched beats loop from n >= ")
    text = report(table, md=str(tmp_path / "grown.md"))
    assert "## Growth: functions along n from default" in text


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"grow": {"n": [1, 4]}}, "give either args_for= or each value's arguments"),
        ({"grow": {"n": {1: (1,), 2: (2,)}}, "args_for": len}, "give either args_for="),
        ({"grow": {"n": [4, 4]}, "args_for": len}, "2 or more distinct integers >= 1"),
        ({"grow": {"n": [0, 4]}, "args_for": len}, "2 or more distinct integers >= 1"),
        ({"grow": {"n": [1, 2], "m": [1, 2]}, "args_for": len}, "grow must name one axis"),
        ({"grow": [1, 2], "args_for": len}, "grow must name one axis"),
        ({"grow": {"n": [1, 2]}, "args_for": len, "grow_budget_s": 0}, "grow_budget_s must be"),
    ],
)
def test_compare_grow_refuses_what_it_cannot_sweep(arguments, says):
    with pytest.raises(InputError, match=re.escape(says)):
        compare({"loop": loop}, probes=False, **arguments)


def test_compare_grow_takes_no_other_arguments():
    with pytest.raises(InputError, match="drop args"):
        compare({"loop": loop}, np.ones(3), grow={"n": [1, 2]}, args_for=np.ones)

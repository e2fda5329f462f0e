"""Calibrate the slow-spell test (`scanbench.spells`) on this machine.

``--cells N`` cells of the ``steady`` backend of `tests/support/scenario_files/spells.py` (no
spell: how often the test fires on a quiet cell) and N of ``planted`` (its size's spell,
1.5x over a quarter of the samples at a place set by the seed: how often it is caught,
and whether where), interleaved, each a real run's cell: a fresh worker, the timing loop,
the spell test in the runner; never measured again (``remeasure=0``) and not counted.
Writes the results file and prints the table for ``docs/performance-log.md``. Heavy: run
it under the lock::

    flock /tmp/scanbench-heavy.lock python -m tests.support.spell_calibration --size smoke \\
        --cells 20 --out results/spells-smoke.json

``--table FILE`` prints the table of a results file written before; ``--recorded FILE
...`` how often the test fires on the samples of stored runs (``docs/results/*.json``,
``tests/support/data/*.json``), cell by cell.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from scanbench.cells import Selection
from scanbench.execution import runner
from scanbench.execution.interference import Interference
from scanbench.results import Run, load_run
from scanbench.sources import file_source
from scanbench.spells import find_spell
from tests.support.paths import SCENARIO_FILES
from tests.support.scenario_files import spells as scenario

SOURCE = file_source(str(SCENARIO_FILES / "spells.py"))


def measure(size: str, cells: int, out: Path) -> Run:
    """``cells`` seeds x (steady, planted) at ``size``, in one run."""
    samples = scenario.SCENARIO.size(size)["samples"]
    planned = []
    invocation = None
    for seed in range(cells):
        selection = Selection((SOURCE,), ("steady", "planted"), (size,), seed=seed)
        invocation = runner.plan(
            selection,
            timing=scenario.timing(samples),
            timeout_s=600,
            probes=False,
            remeasure=0,
        )
        planned += invocation.plan.cells
    plan = dataclasses.replace(invocation.plan, cells=tuple(planned))
    return runner.run(dataclasses.replace(invocation, plan=plan), out, force=True)


def table(run: Run) -> str:
    """One row per (size, backend): cells, the spell test fired, found where it was
    planted (first and last sample within one scanned point), also busy by load."""
    rows = {}
    for record in run.records:
        interference = Interference.from_json(dict(record.interference))
        spell = interference.slow_spell
        busy = any(not reason.startswith("slow spell") for reason in interference.reasons)
        row = rows.setdefault((record.size, record.backend), [0, 0, 0, 0, 0, []])
        row[0] += 1
        row[1] += spell is not None
        row[4] += busy
        if spell is not None:
            row[5].append(spell.factor)
        if record.backend == "planted" and spell is not None:
            first, last = scenario.window(len(record.samples_s), record.seed)
            row[2] += abs(spell.first - first) <= spell.block >= abs(spell.last - last)
        row[3] += record.status != "ok"
    lines = [
        "| size (samples) | backend | cells | test fired | where planted (±1 point) "
        "| failed | busy by load | factors found |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (size, backend), (cells, fired, placed, failed, busy, factors) in sorted(rows.items()):
        samples = scenario.SCENARIO.size(size)["samples"]
        where = f"{placed} of {fired}" if backend == "planted" else "-"
        found = ", ".join(f"{f:.2f}" for f in sorted(factors)) or "-"
        lines.append(
            f"| {size} ({samples}) | {backend} | {cells} | {fired} of {cells} | {where} "
            f"| {failed} | {busy} of {cells} | {found} |"
        )
    env = run.environment
    lines.append("")
    lines.append(f"{env.get('hostname')}, {env.get('cpu_model')}, {env.get('timestamp')}")
    return "\n".join(lines)


def recorded(paths: list[Path]) -> str:
    """How often the test fires on stored runs' samples, and the spells it finds."""
    lines, spells = [], []
    for path in paths:
        run = load_run(path)
        timed = [r for r in run.records if r.samples_s]
        tested = fired = 0
        for record in timed:
            spell = find_spell(record.samples_s, record.seed)
            tested += len(record.samples_s) >= 10  # at least 2 x MIN_LENGTH points
            if spell is not None:
                fired += 1
                label = f"{record.scenario}/{record.backend}/{record.size}"
                busy = "; busy by load" if record.disturbed else ""
                spells.append(f"- `{path}` {label}: {spell.describe()}{busy}")
        when = run.environment.get("timestamp")
        lines.append(f"| `{path}` ({when}) | {len(timed)} | {tested} | {fired} |")
    head = ["| run | timed cells | tested (>= 10 samples) | fired |", "| --- | --- | --- | --- |"]
    return "\n".join([*head, *lines, "", *spells])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="smoke", choices=sorted(scenario.SCENARIO.sizes))
    parser.add_argument("--cells", type=int, default=20)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--table", type=Path, help="print the table of this results file")
    parser.add_argument("--recorded", type=Path, nargs="+", help="stored runs to test")
    args = parser.parse_args()
    if args.recorded:
        print(recorded(args.recorded))
        return
    if args.table:
        print(table(load_run(args.table)))
        return
    out = args.out or Path(f"results/spells-{args.size}.json")
    measure(args.size, args.cells, out)
    print(table(load_run(out)))


if __name__ == "__main__":
    main()

"""The at-scale estimate of the manual's "Several devices and machines" page, measured.

A run of ``--cells`` cells over ``--nodes`` nodes, simulated from a real results file:

1. **The cells**: the records of ``--results`` (each with its measured seconds, worker
   start-up included) copied under new seeds until there are ``--cells`` of them; each
   copy of a table stays a table, as ``--shard-by table`` keeps it.
2. **The split**: `scanbench.execution.shards.assign` over the nodes, by table and by
   cell: the longest node's seconds is the wall time of the cells.
3. **A node's fixed cost**: collecting the environment (what every shard does before
   its first cell), measured here once.
4. **The gather**: the shard files of that run written (their records copied from the
   results file, samples included), then ``gather_into`` timed, the merged file's size,
   the time to load it, and the markdown report's.
5. **The history**: ``history add`` of the merged run timed, its entry's size, and the
   time to read a history of ``--entries`` such entries (what every ``history report``
   reads).

``python docs/at_scale.py --out docs/results/estimates/at-scale.json`` (under the heavy lock: it
times things) does it for the manual's smoke and default runs. The page's figure
(``docs/figures.py``, ``at-scale``) renders that file.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import shutil
import tempfile
import time
from pathlib import Path

from scanbench.cells import Cell
from scanbench.execution import gathering, shards
from scanbench.execution.launcher import collect_environment
from scanbench.history.archive import add
from scanbench.history.archive import load as load_history
from scanbench.invocation import Plan
from scanbench.reports.markdown import render
from scanbench.reports.model import build
from scanbench.results import Run, load_run, write_run
from scanbench.safe_files import write_json_atomic
from scanbench.sampling import TimingConfig

ROOT = Path(__file__).resolve().parent.parent


def _cells_and_records(run: Run, count: int) -> tuple[list[Cell], list, list[float]]:
    """``count`` cells: the run's records again and again under new seeds."""
    sources = {name: facts.source for name, facts in run.scenarios.items()}
    cells, records, costs = [], [], []
    for copy in range(math.ceil(count / len(run.records))):
        for record in run.records:
            if len(cells) == count:
                break
            seed = record.seed + 1000 * copy
            cells.append(
                Cell(record.scenario, record.backend, record.size, record.dtype, seed,
                     sources[record.scenario], record.devices, tuple(record.params.items()),
                     record.cache)
            )  # fmt: skip
            records.append(dataclasses.replace(record, seed=seed))
            costs.append(round(shards.record_cost(record) or 0.0, 3))
    return cells, records, costs


def _timed(action):
    started = time.perf_counter()
    result = action()
    return result, time.perf_counter() - started


def measure(results: Path, cells_wanted: int, nodes: int, entries: int) -> dict:
    run = load_run(results)
    cells, records, costs = _cells_and_records(run, cells_wanted)
    split = {}
    for unit in shards.UNITS:
        placed = shards.assign(cells, costs, nodes, unit)
        loads = [[costs[i] for i in shard] for shard in placed]
        longest, mean, ratio = shards.balance(loads)
        split[unit] = {"longest_s": longest, "mean_s": mean, "balance": ratio}
    environment, environment_s = _timed(collect_environment)
    with tempfile.TemporaryDirectory(prefix="scanbench-at-scale-") as tmp:
        folder = Path(tmp)
        plan = Plan(tuple(cells), TimingConfig(), 1800.0, True)
        invocation = dataclasses.replace(run.invocation, plan=plan)
        chosen = shards.split(cells, nodes, plan.timing, True, "table", run_id="at-scale")
        by_key = {cell.key: record for cell, record in zip(cells, records, strict=True)}
        for index in range(1, nodes + 1):
            shard_invocation = shards.restrict(invocation, chosen, index)
            shard_records = tuple(by_key[cell.key] for cell in shard_invocation.plan.cells)
            # the simulated nodes: this machine's environment under node names, with the
            # measured run's commit marked clean (history add takes only clean trees; what
            # is timed is the add, whatever the commit)
            git = {**(run.environment.get("git") or {}), "dirty": False}
            shard_environment = {**environment, "hostname": f"node{index:03d}", "git": git}
            write_run(folder / f"shard-{index}.json", Run(shard_environment, shard_invocation,
                                                          shard_records))  # fmt: skip
        merged_path = folder / "merged.json"
        _, gather_s = _timed(lambda: gathering.gather_into([folder], merged_path, False))
        merged, load_s = _timed(lambda: load_run(merged_path))
        _, report_s = _timed(lambda: render(build([merged])))
        history = folder / "history"
        added, add_s = _timed(lambda: add([merged_path], history, machine="cluster"))
        entry_path = Path(added[0].detail)
        for copy in range(1, entries):  # more runs of the same shape (other run ids)
            shutil.copy(entry_path, history / f"{copy:04d}-{entry_path.name}")
        loaded, history_s = _timed(lambda: load_history(history))
        assert len(loaded.entries) == 1  # copies of one run count once: read, not kept
        return {
            "environment": {
                key: environment.get(key)
                for key in ("hostname", "cpu_model", "cpu_count", "platform", "versions")
            },
            "measured_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "results": str(results.resolve().relative_to(ROOT)),
            "cells": len(cells),
            "measured_cells": len(run.records),
            "nodes": nodes,
            "tables": len({shards.table_key(cell) for cell in cells}),
            "cell_seconds_total": round(sum(costs), 1),
            "cell_seconds_max": max(costs),
            "split": split,
            "environment_s": environment_s,
            "gather_s": gather_s,
            "merged_bytes": merged_path.stat().st_size,
            "samples": sum(len(record.samples_s) for record in merged.records),
            "load_s": load_s,
            "report_s": report_s,
            "history_add_s": add_s,
            "entry_bytes": entry_path.stat().st_size,
            "history_entries": entries,
            "history_read_s": history_s,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--results",
        action="append",
        help="a results file to draw the cells from; repeatable (default: the manual's "
        "smoke and default runs: few calls with many samples, and long calls with few)",
    )
    parser.add_argument("--cells", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--entries", type=int, default=100)
    parser.add_argument("--out", default=str(ROOT / "docs/results/estimates/at-scale.json"))
    args = parser.parse_args()
    paths = args.results or [ROOT / "docs/results/smoke.json", ROOT / "docs/results/default.json"]
    figures = {
        "estimates": [measure(Path(path), args.cells, args.nodes, args.entries) for path in paths]
    }
    write_json_atomic(args.out, figures)
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()

"""Forked against spawned workers: the same cells measured both ways, alternating.

    python docs/worker_start.py --out docs/results/worker-start/DATE.json \\
        --cells tridiagonal:smoke:sequential-jax,tridiagonal:smoke:numba-serial --pairs 12

Each pair measures one cell twice, one worker forked by the fork server
(`scanbench.execution.forkserver`) and one spawned (``SCANBENCH_FORKSERVER=off``), in an
order that alternates from pair to pair, one cell at a time and without probes (nothing
else runs beside it). Per cell the figure shows the median of the pairs' ratios of the
two medians (forked / spawned) with its exact 95% interval (order statistics of the
sign test: no distribution assumed), and what a worker's start-up cost each way (its
imports, plus the process's start and exit). ``figures.py``'s ``worker-start`` figure
renders the JSON.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys

from harness_speed import measured_by, stamp
from scipy import stats

from scanbench.cells import Cell
from scanbench.execution.forkserver import SWITCH
from scanbench.execution.launcher import run_cell_in_worker
from scanbench.safe_files import write_json_atomic
from scanbench.sampling import TimingConfig

MODES = ("forked", "spawned")
START_STAGES = ("worker imports", "process start-up and exit")


def median_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """The exact distribution-free interval of the median: the order statistics k and
    n + 1 - k (from 1), k the largest with P(Binomial(n, 1/2) <= k - 1) <= (1 - confidence)
    / 2; (nan, nan) when too few values give that confidence."""
    ordered = sorted(values)
    n, tail = len(ordered), (1 - confidence) / 2
    k = 0
    while k < n // 2 and stats.binom.cdf(k, n, 0.5) <= tail:
        k += 1
    if k == 0:
        return float("nan"), float("nan")
    return ordered[k - 1], ordered[n - k]


def measure(cell: Cell, mode: str) -> dict:
    environ = dict(os.environ)
    if mode == "spawned":
        environ[SWITCH] = "off"
    else:
        environ.pop(SWITCH, None)
    record = run_cell_in_worker(cell, TimingConfig(), 900, probes=False, environ=environ)
    if record.status != "ok":
        raise SystemExit(f"{cell.label} ({mode}) failed: {record.error}")
    phases = record.extra.get("phases_s", {})
    return {
        "median_s": statistics.median(record.samples_s),
        "samples": len(record.samples_s),
        "start_s": sum(phases.get(stage, 0.0) for stage in START_STAGES),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the JSON file to write")
    parser.add_argument("--cells", required=True, help="SCENARIO:SIZE:BACKEND[:DTYPE],...")
    parser.add_argument("--pairs", type=int, default=12, help="pairs per cell (default 12)")
    args = parser.parse_args(argv)
    cells = []
    for text in args.cells.split(","):
        parts = text.strip().split(":")
        if len(parts) not in (3, 4):
            parser.error(f"--cells: {text!r} is not SCENARIO:SIZE:BACKEND[:DTYPE]")
        scenario, size, backend = parts[:3]
        dtype = parts[3] if len(parts) == 4 else "float64"
        cells.append(Cell(scenario, backend, size, dtype))
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    trials: dict[str, list[dict]] = {cell.label: [] for cell in cells}
    for pair in range(args.pairs):
        order = MODES if pair % 2 == 0 else MODES[::-1]
        for cell in cells:
            measured = {mode: measure(cell, mode) for mode in order}
            trials[cell.label].append(measured)
            ratio = measured["forked"]["median_s"] / measured["spawned"]["median_s"]
            print(f"pair {pair + 1}/{args.pairs} {cell.label}: {ratio:.3f}", flush=True)
    write_json_atomic(args.out, {**stamp(started), "trials": trials})
    return 0


def render(data: dict) -> str:
    """The figure: per cell, the forked / spawned ratio of medians and the start-up."""
    rows = [
        "| cell | pairs | forked / spawned median, median of pairs [95% interval] "
        "| worker start-up, forked; spawned (median) |",
        "| --- | --- | --- | --- |",
    ]
    for label, pairs in data["trials"].items():
        ratios = [p["forked"]["median_s"] / p["spawned"]["median_s"] for p in pairs]
        low, high = median_interval(ratios)
        start = {mode: statistics.median(p[mode]["start_s"] for p in pairs) for mode in MODES}
        rows.append(
            f"| {label} | {len(pairs)} | {statistics.median(ratios):.3f} "
            f"[{low:.3f}, {high:.3f}] | {start['forked']:.2f} s; {start['spawned']:.2f} s |"
        )
    return "\n".join(rows) + "\n\n" + measured_by("docs/worker_start.py", data)


if __name__ == "__main__":
    sys.exit(main())

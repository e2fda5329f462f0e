"""The diagnosis scored: each JAX backend's lead "What to change" applied and measured.

For every JAX backend of a stored run, its lead finding (`scanbench.diagnosis.diagnose`,
as the report gives it) is read as a prediction. A lead that names a bundled backend as
its fix (a faster backend of the table; the same loop without its waits) predicts that
switching to it gains the ratio of the two medians of the run, with that ratio's
interval. A lead that prices an overhead (a share of the median: dispatches, waits,
transfers) predicts that removing it gains at least ``1 / (1 - share)``; it is applied as
the bundled backend that makes exactly the change its fix says (`APPLIES`). The switch is
then measured the way the gate measures: both backends in their
own served workers, interleaved in seeded random blocks in one job
(`paired_backends.paired`), the exact interval of the median per-block ratio. A lead
that names no backend (not known, far from its limit, an estimate for a GPU) has no
variant to measure, and the row says so; it is not counted as helped or not.

The results file holds the rows, the settings and the machine; ``docs/figures.py``
draws the performance log's table from it (``figure: diagnosis-score PATH``)::

    flock /tmp/scanbench-heavy.lock python -m tests.benchmarks.score_diagnosis \\
        docs/results/default.json --out docs/results/diagnosis-score/DATE.json

A row already in ``--out`` is kept (the file is rewritten whole, atomically, after each
row), so a series can be measured in pieces (``--only SCENARIO/BACKEND``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from scanbench.environment import collect
from scanbench.reports.frame import records_frame
from scanbench.results import load_run
from scanbench.safe_files import write_text_atomic

from .paired_backends import paired

SCORED_ENGINES = ("jax",)

# The bundled backend that applies an overhead's fix, for leads that name none: the same
# work with only what the fix says changed. (scenario, backend, cost) -> variant.
APPLIES = {
    # "move the loop into lax.scan": the same time-major column sweep, in one lax.scan
    ("tridiagonal", "sequential-jax", "dispatch-bound"): "scanned-time-major",
    ("tridiagonal", "sequential-jax-sync", "dispatch-bound"): "scanned-time-major",
    ("tridiagonal", "sequential-jax", "many small executions"): "scanned-time-major",
    ("tridiagonal", "sequential-jax-sync", "many small executions"): "scanned-time-major",
    # "wait once, after the loop": the same loop, queued
    ("tridiagonal", "sequential-jax-sync", "sync-bound"): "sequential-jax",
    # "move the loop into vmap" / "keep values on the device": one call per generation
    ("mppi_tuning", "sequential", "dispatch-bound"): "vmapped",
    ("mppi_tuning", "sequential", "transfer-bound"): "vmapped",
    ("mppi_tuning_cartpole", "sequential", "dispatch-bound"): "vmapped",
    ("mppi_tuning_cartpole", "sequential", "transfer-bound"): "vmapped",
    ("mppi_tuning", "sequential", "many small executions"): "vmapped",
    ("mppi_tuning_cartpole", "sequential", "many small executions"): "vmapped",
    # "jit once, outside the loop": the same controller loop, compiled once
    ("mppi_tuning", "sequential-eager", "recompiling"): "sequential",
    ("mppi_tuning_cartpole", "sequential-eager", "recompiling"): "sequential",
}


@dataclasses.dataclass(frozen=True)
class Lead:
    """One backend's lead finding, read as a prediction."""

    scenario: str
    size: str
    backend: str
    cost: str
    text: str
    fix: str  # what the lead says to do
    variant: str | None  # the backend its fix names or `APPLIES` gives, else None
    predicted: float | None  # this backend's median / the variant's, in the run
    predicted_low: float | None
    predicted_high: float | None  # None: the prediction is a floor (a priced overhead)
    caveats: tuple[str, ...] = ()  # why the run's ratio may not hold (`Neighbour.caveats`)

    @property
    def key(self) -> str:
        return f"{self.scenario}/{self.size}/{self.backend}"


def leads(run_path: Path) -> list[Lead]:
    """The lead finding of every JAX backend of the run (the roofline row excluded)."""
    frame = records_frame([load_run(run_path)])
    found = []
    for row in frame.itertuples():
        if row.engine not in SCORED_ENGINES or row.status != "ok" or not row.findings:
            continue
        if row.strategy == "roofline":
            continue
        lead = row.findings[0]
        neighbour = lead.neighbour
        variant, predicted, caveats = None, (None, None, None), ()
        if neighbour is not None:
            caveats = neighbour.caveats
            table = frame[(frame["scenario"] == row.scenario) & (frame["size"] == row.size)]
            named = table[table["backend"] == neighbour.name]["backend_name"]
            variant = str(named.iloc[0]) if len(named) else None
            predicted = (neighbour.ratio, neighbour.low, neighbour.high)
        elif lead.share is not None and 0 < lead.share < 1:
            variant = APPLIES.get((row.scenario, row.backend_name, str(lead.cost)))
            floor = 1.0 / (1.0 - lead.share)
            predicted = (floor, floor, None) if variant else (None, None, None)
        found.append(
            Lead(
                row.scenario,
                row.size,
                row.backend_name,
                str(lead.cost),
                lead.text(),
                lead.fix,
                variant,
                *predicted,
                caveats,
            )
        )
    return found


def measured(lead: Lead, settings: dict[str, Any]) -> dict[str, Any]:
    """The switch the lead names, measured: gain = this backend's time / the variant's
    per block (above 1: the fix helped), with its exact interval."""
    result = paired(lead.scenario, lead.size, (lead.variant, lead.backend), **settings)
    low, high = result["interval"]
    return {
        "gain": result["ratio"],
        "gain_low": low,
        "gain_high": high,
        "medians_s": {
            lead.variant: result["medians_s"][0],
            lead.backend: result["medians_s"][1],
        },
        "block_medians_s": result["block_medians_s"],
    }


def verdict(row: dict[str, Any]) -> str:
    """``helped`` (the interval of the gain is above 1), ``no gain`` (below or around 1),
    or ``not applied`` (the lead names no backend)."""
    if row.get("gain") is None:
        return "not applied"
    low = row["gain_low"]
    return "helped" if low is not None and low > 1.0 else "no gain"


def as_predicted(row: dict[str, Any]) -> bool | None:
    """Whether the measured interval of the gain overlaps the predicted one (reaches the
    predicted floor, for a priced overhead)."""
    if row.get("gain") is None or row.get("predicted") is None:
        return None
    low, high = row["gain_low"], row["gain_high"]
    if low is None or high is None:
        return None
    if row["predicted_high"] is None:
        return high >= row["predicted_low"]
    return low <= row["predicted_high"] and row["predicted_low"] <= high


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="the stored run whose diagnoses are scored")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", action="append", default=[], help="SCENARIO/BACKEND")
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--per-block", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--confidence", type=float, default=0.95)
    args = parser.parse_args(argv)
    settings = {
        "blocks": args.blocks,
        "per_block": args.per_block,
        "pairs": args.pairs,
        "seed": args.seed,
        "confidence": args.confidence,
    }
    previous = json.loads(args.out.read_text(encoding="utf-8")) if args.out.exists() else {}
    rows = {row["key"]: row for row in previous.get("rows", [])}
    environment = collect(measure_bandwidth=False)
    recorded = load_run(args.run).environment.get("timestamp")  # read once, not per row
    keep = ("timestamp", "python", "versions", "cpu_model", "cpu_count", "git_commit")
    for lead in leads(args.run):
        wanted = not args.only or f"{lead.scenario}/{lead.backend}" in args.only
        if lead.key in rows or not wanted:
            continue
        row = {"key": lead.key, **dataclasses.asdict(lead)}
        if lead.variant is not None:
            row.update(measured(lead, settings))
        row["verdict"] = verdict(row)
        row["as_predicted"] = as_predicted(row)
        rows[lead.key] = row
        print(
            f"{lead.key}: {lead.cost} -> {lead.variant}: predicted {lead.predicted}, "
            f"measured {row.get('gain')} [{row.get('gain_low')}, {row.get('gain_high')}]",
            file=sys.stderr,
        )
        document = {
            "run": str(args.run),
            "run_recorded": recorded,
            "settings": settings,
            "machine": previous.get("machine") or {k: environment.get(k) for k in keep},
            "rows": list(rows.values()),
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(args.out, json.dumps(document, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Does the JAX CMA-ME search as well as pyribs'? Coverage and QD score over seeds, stored.

    python docs/qd_seeds.py --system pendulum --size default --seeds 5 \\
        --out docs/results/qd/seeds-default.json

Runs `scanbench.scenarios.qd_tuning.seed_comparison` (pyribs' CMA-ME with the population
evaluated in one jitted call, against the JAX CMA-ME of `scanned` and `sharded`, the same
budget and seeds) and stores the numbers per seed, the verdict and the machine.
``figures.py``'s ``qd-seeds`` figure renders the JSON: per search, the minimum, median and
maximum over the seeds, and whether the JAX median lies within pyribs' range (a
statistical check over a few seeds, not a test of equality: the two cannot match number
for number).
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys

from harness_speed import measured_by, stamp

from scanbench.safe_files import write_json_atomic
from scanbench.scenarios.qd_tuning.seed_comparison import NUMBERS, compare_seeds, verdict

SEARCHES = {
    "pyribs": "pyribs CMA-ME (sequential, library, numba)",
    "jax": "JAX CMA-ME (scanned, sharded)",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", choices=("pendulum", "cartpole"), default="pendulum")
    parser.add_argument("--size", choices=("smoke", "default", "large"), default="default")
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    parser.add_argument("--out", required=True, help="the JSON file to write")
    args = parser.parse_args(argv)
    if args.seeds < 2:
        parser.error(f"--seeds must be >= 2 for a range, got {args.seeds}")
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    seeds = list(range(args.seeds))
    found = compare_seeds(args.system, args.size, seeds)
    within, lines = verdict(found)
    print("\n".join(lines))
    document = {
        **stamp(started),
        "system": args.system,
        "size": args.size,
        "seeds": seeds,
        "found": found,
        "within": within,
    }
    write_json_atomic(args.out, document)
    return 0 if within else 1


def render(data: dict) -> str:
    """Per search: coverage and QD score over the seeds (min, median, max)."""
    rows = [
        f"{data['system']} at `{data['size']}`, seeds {data['seeds'][0]}..{data['seeds'][-1]}:",
        "",
        "| search | coverage: min, median, max | QD score: min, median, max |",
        "| --- | --- | --- |",
    ]
    for search, runs in data["found"].items():
        cells = []
        for name in NUMBERS:
            values = [run[name] for run in runs]
            form = "{:.3f}" if name == "coverage" else "{:.1f}"
            cells.append(
                ", ".join(
                    form.format(v) for v in (min(values), statistics.median(values), max(values))
                )
            )
        rows.append(f"| {SEARCHES.get(search, search)} | {cells[0]} | {cells[1]} |")
    verdict_line = (
        "The JAX medians of both numbers lie within pyribs' ranges."
        if data["within"]
        else "A JAX median lies OUTSIDE pyribs' range."
    )
    return "\n".join(rows) + f"\n\n{verdict_line}\n\n" + measured_by("docs/qd_seeds.py", data)


if __name__ == "__main__":
    sys.exit(main())

"""Two backends of one scenario, interleaved in randomized blocks in one job: the paired
ratio of their times, with an exact distribution-free interval.

The gate's `--against` method (`scanbench.gate.interleave`) applied to two backends of
the same checkout instead of two revisions of one backend: each backend runs in its own
gate workers (`harness/gate/serve.py`: its declared XLA flags, one XLA:CPU device per core
for a sharded backend, its setup before every call), ``--pairs`` workers per backend,
block b taken by pair b mod pairs, both backends sampled in every block in a seeded
random order. Per block, the ratio of the medians (``slower / faster``); the interval of
the median of those ratios is the binomial order-statistic one (`scanbench.statistics.
median_interval`: exact, distribution-free, as ``scipy.stats.quantile_test``).
Workers are not pinned: a parallel backend (Numba ``prange``, sharded) needs every core.

Used for the "within 1.3x of Numba" target of #50 (docs/performance-log.md)::

    flock /tmp/scanbench-heavy.lock python -m tests.benchmarks.paired_backends \\
        tridiagonal default sharded numba-time-major --blocks 30
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
from pathlib import Path

import numpy as np

from scanbench.gate.interleave import ServedCell, Side, project_root, schedule
from scanbench.gate.rules import BaselineRule
from scanbench.statistics import median_interval


def paired(
    scenario: str,
    size: str,
    backends: tuple[str, str],
    blocks: int,
    per_block: int,
    pairs: int,
    seed: int,
    confidence: float,
    timeout_s: float = 900.0,
    roots: tuple[Path, Path] | None = None,
) -> dict:
    """Interleave ``backends`` (first, second) and return each block's medians, the
    median ratio second / first and its ``confidence`` interval. ``roots``: the trees
    each side's code is measured from (default: this checkout for both; two revisions of
    one backend, e.g. a baseline worktree and this checkout)."""
    roots = roots or (project_root(), project_root())
    sides = ("first", "second")
    with contextlib.ExitStack() as stack:
        workers: dict[str, list[ServedCell]] = {side: [] for side in sides}
        for pair in range(pairs):
            for index in (0, 1) if pair % 2 == 0 else (1, 0):
                rule = BaselineRule(scenario, backends[index], size, delta=0.0, floor_s=0.0)
                served = ServedCell(rule, Side(Path(roots[index])), timeout_s)
                workers[sides[index]].append(stack.enter_context(served))
        medians: dict[str, list[float]] = {side: [] for side in sides}
        for index, order in enumerate(schedule(blocks, seed)):
            for side in sides if order[0] == "baseline" else sides[::-1]:
                samples = workers[side][index % pairs].samples(per_block)
                medians[side].append(float(np.median(samples)))
    first, second = (np.asarray(medians[side]) for side in sides)
    ratios = np.sort(second / first)
    low, high = median_interval(ratios, confidence)
    return {
        "scenario": scenario,
        "size": size,
        "backends": list(backends),
        "roots": [str(root) for root in roots],
        "blocks": blocks,
        "per_block": per_block,
        "pairs": pairs,
        "medians_s": [float(np.median(medians[side])) for side in sides],
        "ratio": float(np.median(ratios)),
        "interval": [
            low if math.isfinite(low) else None,
            high if math.isfinite(high) else None,
        ],
        "confidence": confidence,
        "block_medians_s": medians,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario")
    parser.add_argument("size")
    parser.add_argument("first", help="the backend in the denominator")
    parser.add_argument("second", help="the backend in the numerator")
    parser.add_argument("--blocks", type=int, default=30)
    parser.add_argument("--per-block", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--root", help="the tree both sides are measured from (default: here)")
    parser.add_argument("--first-root", help="the first side's tree (e.g. a baseline worktree)")
    parser.add_argument("--out", help="also write the result as JSON here")
    args = parser.parse_args(argv)
    result = paired(
        args.scenario,
        args.size,
        (args.first, args.second),
        args.blocks,
        args.per_block,
        args.pairs,
        args.seed,
        args.confidence,
        roots=(
            Path(args.first_root or args.root or project_root()),
            Path(args.root or project_root()),
        ),
    )
    low, high = result["interval"]
    first, second = result["backends"]
    print(
        f"{result['scenario']}/{result['size']}: {second} / {first} = {result['ratio']:.3f}, "
        f"{result['confidence']:.0%} interval [{low}, {high}] over {result['blocks']} blocks "
        f"(medians {result['medians_s'][0] * 1e3:.2f} ms and "
        f"{result['medians_s'][1] * 1e3:.2f} ms)"
    )
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

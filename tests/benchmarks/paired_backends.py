"""Two backends of one scenario, interleaved in randomized blocks in one job: the paired
ratio of their times, with an exact distribution-free interval.

The gate's `--against` method (`scanbench.gate.interleave`) applied to two backends of
the same checkout instead of two revisions of one backend: each backend runs in its own
gate workers (`harness/gate/serve.py`: its declared XLA flags, one XLA:CPU device per core
for a sharded backend, its setup before every call), ``--pairs`` workers per backend,
block b taken by pair b mod pairs, both backends sampled in every block in a seeded
random order. Per block, the ratio of the medians (``slower / faster``); the interval of
the median of those ratios is the binomial order-statistic one (`scanbench.timing.
median_interval_indices`: exact, distribution-free, as ``scipy.stats.quantile_test``).
Workers are not pinned: a parallel backend (Numba ``prange``, sharded) needs every core.

Used for the "within 1.3x of Numba" target of #50 (docs/performance-log.md)::

    flock /tmp/scanbench-heavy.lock python -m tests.benchmarks.paired_backends \\
        tridiagonal default sharded numba-time-major --blocks 30
"""

from __future__ import annotations

import argparse
import contextlib
import json

import numpy as np

from scanbench.gate.interleave import ServedCell, Side, project_root, schedule
from scanbench.gate.rules import BaselineRule
from scanbench.timing import median_interval_indices


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
) -> dict:
    """Interleave ``backends`` (first, second) and return each block's medians, the
    median ratio second / first and its ``confidence`` interval."""
    side = Side(project_root())
    with contextlib.ExitStack() as stack:
        workers: dict[str, list[ServedCell]] = {name: [] for name in backends}
        for pair in range(pairs):
            for name in backends if pair % 2 == 0 else backends[::-1]:
                rule = BaselineRule(scenario, name, size, delta=0.0, floor_s=0.0)
                workers[name].append(stack.enter_context(ServedCell(rule, side, timeout_s)))
        medians: dict[str, list[float]] = {name: [] for name in backends}
        for index, order in enumerate(schedule(blocks, seed)):
            names = backends if order[0] == "baseline" else backends[::-1]
            for name in names:
                samples = workers[name][index % pairs].samples(per_block)
                medians[name].append(float(np.median(samples)))
    first, second = (np.asarray(medians[name]) for name in backends)
    ratios = np.sort(second / first)
    low, high = median_interval_indices(len(ratios), confidence)
    return {
        "scenario": scenario,
        "size": size,
        "backends": list(backends),
        "blocks": blocks,
        "per_block": per_block,
        "pairs": pairs,
        "medians_s": {name: float(np.median(medians[name])) for name in backends},
        "ratio": float(np.median(ratios)),
        "interval": [
            float(ratios[low]) if low >= 0 else None,
            float(ratios[high]) if high < len(ratios) else None,
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
    )
    low, high = result["interval"]
    first, second = result["backends"]
    print(
        f"{result['scenario']}/{result['size']}: {second} / {first} = {result['ratio']:.3f}, "
        f"{result['confidence']:.0%} interval [{low}, {high}] over {result['blocks']} blocks "
        f"(medians {result['medians_s'][first] * 1e3:.2f} ms and "
        f"{result['medians_s'][second] * 1e3:.2f} ms)"
    )
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

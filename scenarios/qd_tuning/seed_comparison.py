"""Does the JAX CMA-ME search as well as pyribs'? Coverage and QD score over seeds.

The check of a cell holds a backend to what it reports, never to another backend's
archive: the JAX CMA-ME (`scanned`, `sharded`) cannot match pyribs number for number.
This script compares them as searches instead: for each seed, both run the same budget
(emitters x batch x generations evaluations of the same objective), and the JAX run's
coverage and QD score should fall within the range of pyribs' runs. It takes minutes at
`default`, so it is a script, not a test::

    python -m scanbench.scenarios.qd_tuning.seed_comparison --system pendulum --size default \\
        --seeds 8

It prints one line per backend (minimum, median and maximum over the seeds) and exits
with 1 when the JAX median of either number lies outside pyribs' range.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import jax
import numpy as np

from .cma_me_scan import tune_cma_me
from .evaluation import evaluate_population
from .problem import QdInputs, evaluation_keys, make_inputs, root_key, sizes
from .ribs_loops import tune_with_pyribs

NUMBERS = ("coverage", "qd_score")


def _numbers(result: Any) -> dict[str, float]:
    occupied = np.asarray(result.occupied, bool)
    return {"coverage": float(occupied.mean()), "qd_score": float(np.asarray(result.qd_score)[-1])}


def compare_seeds(system: str, size_name: str, seeds: list[int]) -> dict[str, list[dict]]:
    """``{"pyribs": [numbers per seed], "jax": [...]}`` for the same seeds and budget."""
    inputs: QdInputs = make_inputs(sizes(system)[size_name], 0, "float32")
    config = inputs.config
    scanned = jax.jit(lambda root: tune_cma_me(root, config))
    evaluate = jax.jit(lambda keys, z: evaluate_population(keys, z, config.mppi))
    found: dict[str, list[dict]] = {"pyribs": [], "jax": []}
    for seed in seeds:
        root = root_key(seed)
        keys = evaluation_keys(root, config.mppi.episodes)

        def evaluate_generation(solutions, keys=keys):
            return np.asarray(evaluate(keys, np.asarray(solutions, np.float32)), np.float64)

        found["pyribs"].append(_numbers(tune_with_pyribs(config, seed, evaluate_generation)))
        found["jax"].append(_numbers(jax.device_get(scanned(root))))
    return found


def verdict(found: dict[str, list[dict]]) -> tuple[bool, list[str]]:
    """Whether the JAX medians lie within pyribs' ranges, and one line per backend."""
    lines, within = [], True
    for name in NUMBERS:
        reference = np.array([run[name] for run in found["pyribs"]])
        ours = float(np.median([run[name] for run in found["jax"]]))
        inside = reference.min() <= ours <= reference.max()
        within &= bool(inside)
        for backend, runs in found.items():
            values = np.array([run[name] for run in runs])
            lines.append(
                f"{name:9} {backend:7} min {values.min():9.4g}  median {np.median(values):9.4g}"
                f"  max {values.max():9.4g}"
            )
        lines.append(f"{name:9} JAX median {'within' if inside else 'OUTSIDE'} pyribs' range")
    return within, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", choices=("pendulum", "cartpole"), default="pendulum")
    parser.add_argument("--size", choices=("smoke", "default", "large"), default="default")
    parser.add_argument("--seeds", type=int, default=8, help="seeds 0..N-1 (default 8)")
    args = parser.parse_args(argv)
    if args.seeds < 2:
        parser.error(f"--seeds must be >= 2 for a range, got {args.seeds}")
    within, lines = verdict(compare_seeds(args.system, args.size, list(range(args.seeds))))
    print("\n".join(lines))
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())

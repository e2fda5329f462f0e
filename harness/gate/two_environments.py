"""`scanbench ab`: the same cells, the same code, two environments (another jax, other
XLA_FLAGS), measured with the gate's interleaved paired blocks.

Per cell: the time ratio B / A (median over blocks of the per-block ratio of medians) with
its two-sided interval, a verdict (*slower* when the one-sided lower bound exceeds
1 + delta and the added time the floor, confirmed by a re-run in fresh processes as the
gate does; *faster* symmetrically; else *no significant change*), and the counts that
changed (totals, kernels by HLO op, dispatches by function), from a counts-only cell
worker run on each side. Both sides check their output against the scenario's reference
before timing (the serve worker does).
"""

from __future__ import annotations

import dataclasses
import enum
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..api import InputError
from ..cells import Cell
from ..cells import cell as selected_cell
from ..execution.launcher import run_cell_in_worker
from ..import_path import with_import_root
from ..sampling import TimingConfig
from ..sources import shortest
from ..statistics import median_interval
from .decide import block_ratios, paired_decision
from .environments import Environment, probe, requirement_venv
from .interleave import Side, measure_blocks, project_root
from .rules import BaselineRule, Settings


class Change(enum.StrEnum):
    """What side B did to a cell's time."""

    SLOWER = "slower"
    FASTER = "faster"
    SAME = "no significant change"


SLOWER, FASTER, SAME = Change.SLOWER, Change.FASTER, Change.SAME
NUMBERED = re.compile(r"\.\d+$")
COUNT_KEYS = ("dispatches", "kernels", "kernels_static", "launch_equivalent", "h2d", "d2h")


@dataclasses.dataclass(frozen=True)
class CellComparison:
    """One cell measured on both sides."""

    cell: str
    ratio: float  # B / A
    low: float  # two-sided interval of the ratio at the confidence level
    high: float
    verdict: Change
    detail: str
    counts: Mapping[str, tuple[Any, Any]]  # changed per-call counts: name -> (A, B)
    breakdown: Mapping[str, tuple[float, float]]  # changed kernels/dispatches by name
    count_errors: tuple[str, ...] = ()


def _verdict(rule, settings: Settings, blocks) -> tuple[Change, Any, Any]:
    confidence = settings.confidence
    slower = paired_decision(
        blocks["baseline"], blocks["candidate"], rule.delta, rule.floor_s, confidence
    )
    faster = paired_decision(
        blocks["candidate"], blocks["baseline"], rule.delta, rule.floor_s, confidence
    )
    verdict = SLOWER if slower.suspect else FASTER if faster.suspect else SAME
    return verdict, slower, faster


@dataclasses.dataclass(frozen=True)
class SideSpec:
    """A side as the user gave it: an interpreter or requirements, and variables."""

    label: str  # "A" or "B"
    python: str | None = None
    requirements: tuple[str, ...] = ()
    environ: Mapping[str, str] = dataclasses.field(default_factory=dict)


def prepare_side(spec: SideSpec, root: Path | None = None) -> Environment:
    """The side ready to measure: its venv built (cached) when it names requirements,
    then probed (it must import jax and the project)."""
    if spec.python and spec.requirements:
        flag = spec.label.lower()
        raise InputError(f"--{flag}-python and --{flag}-requirements: give one of them")
    root = root or project_root()
    python = spec.python
    if spec.requirements:
        print(f"side {spec.label}: venv with {' '.join(spec.requirements)}", file=sys.stderr)
        python = requirement_venv(spec.requirements, root)
    return probe(spec.label, python or sys.executable, spec.environ, root)


def compare_environments(
    cells: Sequence[Cell], a: SideSpec, b: SideSpec, settings: Settings, timeout_s: float
) -> tuple[list[CellComparison], dict[str, Environment]]:
    """Every cell on both sides (A is the baseline, B the candidate)."""
    sides = {"baseline": prepare_side(a), "candidate": prepare_side(b)}
    comparisons = []
    for index, cell in enumerate(cells):
        print(f"[{index + 1}/{len(cells)}] {cell.label}: comparing", file=sys.stderr)
        scenario = shortest(cell.scenario, cell.source)
        rule = BaselineRule(
            scenario, cell.backend, cell.size, settings.delta, settings.floor_s, cell.dtype
        )
        seed = settings.seed + 2 * index
        comparisons.append(compare_cell(rule, sides, settings, seed, timeout_s))
    return comparisons, sides


def compare_cell(
    rule: BaselineRule,
    sides: Mapping[str, Environment],
    settings: Settings,
    seed: int,
    timeout_s: float,
    root: Path | None = None,
) -> CellComparison:
    """Interleaved blocks of A (``baseline``) and B (``candidate``), a verdict confirmed
    by a fresh re-run when it says *slower* or *faster*, and the counts of each side."""
    root = root or project_root()
    served = {
        side: Side(root, python=env.python, environ=dict(env.environ))
        for side, env in sides.items()
    }
    blocks = measure_blocks(rule, served, settings, seed, timeout_s).blocks
    verdict, slower, _ = _verdict(rule, settings, blocks)
    detail = ""
    if verdict != SAME:  # as the gate does: a change must show twice, in fresh processes
        again = measure_blocks(rule, served, settings, seed + 1, timeout_s).blocks
        confirmed, _, _ = _verdict(rule, settings, again)
        if confirmed != verdict:
            detail = f"first measurement said {verdict}; the re-run did not confirm it"
            verdict = SAME
        else:
            detail = "confirmed by a re-run in fresh processes"
            blocks = {side: blocks[side] + again[side] for side in blocks}
    ratios = block_ratios(blocks["baseline"], blocks["candidate"])
    low, high = median_interval(ratios, settings.confidence)
    difference = slower.difference_s
    detail = (
        f"difference {difference * 1e6:+.1f} us; " + detail
        if detail
        else (f"difference {difference * 1e6:+.1f} us")
    )
    counts, breakdown, errors = compare_counts(rule, sides, timeout_s, root)
    return CellComparison(
        rule.label, slower.ratio, low, high, verdict, detail, counts, breakdown, errors
    )


def compare_counts(rule, sides, timeout_s, root):
    """The per-call counts of each side (a counts-only worker on its interpreter and
    variables) and those that differ: totals, and kernels / dispatches by kind."""

    cell = selected_cell(rule.scenario, rule.backend, rule.size, rule.dtype)
    per_side, errors = {}, []
    for side, env in sides.items():
        environ = with_import_root({**os.environ, **env.environ}, root)
        record = run_cell_in_worker(
            cell, TimingConfig(), timeout_s, counts_only=True, environ=environ, python=env.python
        )
        if record.status != "ok":
            errors.append(f"{env.label}: {record.error}")
            continue
        per_side[side] = (record.counts.per_call(), record.counts.breakdowns())
    if len(per_side) < 2:
        return {}, {}, tuple(errors)
    (a_totals, a_parts), (b_totals, b_parts) = per_side["baseline"], per_side["candidate"]
    counts = {
        key: (a_totals.get(key), b_totals.get(key))
        for key in COUNT_KEYS
        if a_totals.get(key) != b_totals.get(key)
    }
    breakdown = {}
    for part, prefix in (("kernels_by_op", "kernels"), ("dispatches_by_function", "dispatches")):
        a, b = _by_kind(a_parts.get(part, {})), _by_kind(b_parts.get(part, {}))
        for name in sorted(set(a) | set(b)):
            if a.get(name, 0) != b.get(name, 0):
                breakdown[f"{prefix}: {name}"] = (a.get(name, 0), b.get(name, 0))
    return counts, breakdown, tuple(errors)


def _by_kind(counts: Mapping[str, float]) -> dict[str, float]:
    """Counts summed over instruction numbers (``module/copy.97`` and ``module/copy.100``
    are both ``module/copy``): XLA renumbers instructions between versions and flags, so
    only the kinds say what changed."""
    out: dict[str, float] = {}
    for name, value in counts.items():
        kind = NUMBERED.sub("", name)
        out[kind] = out.get(kind, 0) + value
    return out

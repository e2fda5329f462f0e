"""Regression gate decisions: counts exact, times only on same-run comparisons.

Pure functions over stored records and sample arrays; `harness.interleave` produces the
paired samples of a baseline comparison, `harness.cli` wires them to `scanbench gate`.
Outcomes: ``pass``, ``fail`` (a regression: exit 1) and ``inconclusive`` (a time
interval that straddles its threshold: shown, and a failure only with ``--strict``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from harness.api import Record
from harness.counts import GATED, KEYS
from harness.gate_rules import CountRule, Invariant
from harness.statistics import median_interval, ratio_interval

OUTCOMES = ("pass", "fail", "inconclusive")
TOLERANCE = 1e-9  # counts are exact; this only absorbs float scaling (MPPI: x generations)


@dataclasses.dataclass(frozen=True)
class PairedDecision:
    """A baseline comparison of one cell from interleaved blocks."""

    ratio: float  # median over blocks of candidate block median / baseline block median
    low: float  # one-sided lower bound of that median ratio at the confidence level
    difference_s: float  # median candidate time - median baseline time
    suspect: bool  # low > 1 + delta and difference above the floor
    detectable: float = float("nan")  # smallest slowdown factor this measurement would flag


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The decision on one rule: which rule, outcome, and the numbers behind it.

    ``measurements`` (baseline rules): the interleaved measurement, then the confirming
    re-run when the first was suspect."""

    kind: str  # count | invariant | baseline
    rule: str
    outcome: str
    detail: str
    measurements: tuple[PairedDecision, ...] = ()


def find_record(
    records: Iterable[Record], scenario: str, backend: str, size: str, dtype: str | None
) -> Record | None:
    for record in records:
        if (record.scenario, record.backend, record.size) == (scenario, backend, size) and (
            dtype is None or record.dtype == dtype
        ):
            return record
    return None


def _grown(expected: Mapping[str, float], actual: Mapping[str, float]) -> list[str]:
    """Names whose count went up (new names count from 0), largest increase first."""
    growth = {
        name: (expected.get(name, 0.0), value)
        for name, value in actual.items()
        if value > expected.get(name, 0.0) + TOLERANCE
    }
    ordered = sorted(growth.items(), key=lambda item: item[1][0] - item[1][1])
    return [f"{name} {before:g} -> {after:g}" for name, (before, after) in ordered]


def check_counts(rules: Sequence[CountRule], records: Sequence[Record]) -> list[Verdict]:
    """Every count of every rule: fail when a per-call count exceeds its expectation."""
    verdicts = []
    for rule in rules:
        record = find_record(records, rule.scenario, rule.backend, rule.size, rule.dtype)
        if record is None or record.status != "ok":
            why = "not measured" if record is None else f"{record.status}: {record.error}"
            verdicts.append(Verdict("count", rule.label, "fail", f"cell {why}"))
            continue
        actual = record.counts.per_call()
        breakdowns = record.counts.breakdowns()
        problems, improved = [], []
        for key, limit in rule.limits.items():
            value = actual.get(key)
            if value is None:
                errors = record.counts.error_text()
                problems.append(f"{key}: no number ({errors or 'probe not run'})")
            elif value > limit + TOLERANCE:
                text = f"{key} {value:g} > {limit:g} expected"
                name = KEYS[key].breakdown
                if name is not None:
                    grown = _grown(getattr(rule, name), breakdowns[name])
                    text += f"; grew: {', '.join(grown[:5]) or '(breakdown unchanged)'}"
                else:
                    text += "; `scanbench profile` shows where the transfers happen"
                problems.append(text)
            elif value < limit - TOLERANCE:
                improved.append(f"{key} {limit:g} -> {value:g}")
        if problems:
            verdicts.append(Verdict("count", rule.label, "fail", "; ".join(problems)))
        else:
            detail = ", ".join(f"{k} {actual[k]:g}" for k in rule.limits)
            if improved:
                detail += (
                    f" (fewer than expected: {', '.join(improved)}; --update-counts locks it in)"
                )
            verdicts.append(Verdict("count", rule.label, "pass", detail))
    return verdicts


def count_expectation(record: Record) -> dict:
    """A ``[[count]]`` table (for the counts file) from a measured record."""
    actual = record.counts.per_call()
    table = {
        "scenario": record.scenario,
        "backend": record.backend,
        "size": record.size,
        "dtype": record.dtype,
    }
    table.update({key: _tidy(actual[key]) for key in GATED if actual.get(key) is not None})
    for name, breakdown in record.counts.breakdowns().items():
        table[name] = {key: _tidy(value) for key, value in breakdown.items()}
    return table


def _tidy(value: float) -> float | int:
    """Whole counts as integers (they read better in the counts file)."""
    return int(value) if float(value).is_integer() else value


def decide_invariant(
    invariant: Invariant, slow: Sequence[float], fast: Sequence[float], confidence: float, seed: int
) -> Verdict:
    """``factor``: pass when the whole interval of median(slow)/median(fast) is >= factor,
    fail when all of it is below. ``within``: pass when all of it is <= within, fail when
    all of it is above. Inconclusive when the interval straddles the threshold."""
    point, low, high = ratio_interval(slow, fast, confidence, seed)
    if invariant.within is not None:
        threshold, passed, failed = (
            invariant.within,
            high <= invariant.within,
            low > invariant.within,
        )
        relation = "<="
    else:
        threshold, passed, failed = (
            invariant.factor,
            low >= invariant.factor,
            high < invariant.factor,
        )
        relation = ">="
    detail = (
        f"ratio {point:.2f}x, {confidence:.0%} CI [{low:.2f}, {high:.2f}] "
        f"vs {relation} {threshold:g}x ({len(slow)} and {len(fast)} samples)"
    )
    if invariant.why:
        detail += f"; why: {invariant.why}"
    outcome = "pass" if passed else "fail" if failed else "inconclusive"
    return Verdict("invariant", invariant.label, outcome, detail)


def check_invariants(
    invariants: Sequence[Invariant], records: Sequence[Record], confidence: float, seed: int
) -> list[Verdict]:
    verdicts = []
    for invariant in invariants:
        pair = [
            find_record(records, invariant.scenario, name, invariant.size, invariant.dtype)
            for name in (invariant.slower, invariant.faster)
        ]
        missing = [
            f"{name}: {'not measured' if r is None else r.status + ' ' + (r.error or '')}"
            for name, r in zip((invariant.slower, invariant.faster), pair, strict=True)
            if r is None or r.status != "ok" or len(r.samples_s) == 0
        ]
        if missing:
            verdicts.append(Verdict("invariant", invariant.label, "fail", "; ".join(missing)))
            continue
        disturbed = [
            f"{record.backend}: {'; '.join(record.interference.get('reasons', ()))}"
            for record in pair
            if record.disturbed
        ]
        if disturbed:
            detail = (
                "not decided: the machine was busy while a cell ran ("
                + "; ".join(disturbed)
                + "); measure again on a quiet machine"
            )
            verdicts.append(Verdict("invariant", invariant.label, "inconclusive", detail))
            continue
        slow, fast = (record.samples_s for record in pair)
        verdicts.append(decide_invariant(invariant, slow, fast, confidence, seed))
    return verdicts


def paired_decision(
    baseline_blocks: Sequence[Sequence[float]],
    candidate_blocks: Sequence[Sequence[float]],
    delta: float,
    floor_s: float,
    confidence: float,
    seed: int,
) -> PairedDecision:
    """Per block, the ratio of the candidate's to the baseline's median; the lower
    ``confidence`` bound of the median of these ratios (bootstrap over blocks, one-sided)
    must exceed 1 + delta, and the slowdown the floor, for the cell to be suspect.

    ``detectable`` is the smallest slowdown this measurement would have flagged: slowing
    every candidate call by a factor s scales the ratios and their lower bound by s, so
    relative to what was measured s must exceed (1 + delta) x ratio / low (and the added
    time must exceed the floor: s > 1 + floor / baseline median)."""
    base = np.asarray([np.median(block) for block in baseline_blocks])
    cand = np.asarray([np.median(block) for block in candidate_blocks])
    ratios = cand / base
    ratio = float(np.median(ratios))
    low = median_interval(ratios, confidence, seed, "greater")[0] if len(ratios) >= 2 else ratio
    base_median = float(np.median(np.concatenate(baseline_blocks)))
    difference = float(np.median(np.concatenate(candidate_blocks))) - base_median
    detectable = max(
        (1 + delta) * ratio / low if low > 0 else float("inf"),
        1 + floor_s / base_median if base_median > 0 else float("inf"),
    )
    suspect = low > 1 + delta and difference > floor_s
    return PairedDecision(ratio, low, difference, suspect, detectable)


def markdown(verdicts: Sequence[Verdict], title: str = "scanbench gate") -> str:
    """One section: the overall result, then a table of every rule (failures first)."""
    failed = [v for v in verdicts if v.outcome == "fail"]
    unsure = [v for v in verdicts if v.outcome == "inconclusive"]
    head = "FAILED" if failed else "passed"
    summary = f"{len(verdicts)} rules: {len(failed)} failed, {len(unsure)} inconclusive"
    lines = [f"## {title}: {head}", "", summary, ""]
    if verdicts:
        order = {"fail": 0, "inconclusive": 1, "pass": 2}
        lines += ["| outcome | kind | rule | numbers |", "| --- | --- | --- | --- |"]
        for v in sorted(verdicts, key=lambda v: order[v.outcome]):
            detail = v.detail.replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {v.outcome} | {v.kind} | {v.rule} | {detail} |")
        lines.append("")
    return "\n".join(lines)

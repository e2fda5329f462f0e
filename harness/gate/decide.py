"""Regression gate decisions: counts exact, times only on interleaved comparisons.

Pure functions over stored records and sample arrays, returning numbers: a `Verdict`
holds the rule, its `Outcome` and the findings behind it (per count, the ratio intervals of
an invariant, the paired measurements of a baseline comparison), never formatted text;
`scanbench.gate.render` writes the text once, at the edge. `scanbench.gate.interleave`
produces the paired samples of invariants and baseline comparisons.
Outcomes: ``pass``, ``fail`` (a regression: exit 1) and ``inconclusive`` (a time
interval that straddles its threshold: shown, and a failure only with ``--strict``).

Every time decision is taken on the per-block ratios of interleaved blocks (`block_ratios`)
and the exact distribution-free interval of their median (`scanbench.statistics.
median_interval`: binomial order statistics, the sign-test interval), never on two
medians measured apart.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ..api import WARM, Record
from ..counts import GATED, KEYS
from ..statistics import median_interval
from .explain import Difference
from .rules import CountRule, Invariant

TOLERANCE = 1e-9  # counts are exact; this only absorbs float scaling (MPPI: x generations)


class Outcome(enum.StrEnum):
    PASS = "pass"
    FAIL = "fail"  # a regression: exit 1
    INCONCLUSIVE = "inconclusive"  # shown; a failure only with --strict


class Kind(enum.StrEnum):
    COUNT = "count"  # bench/counts.toml: exact per-call counts
    INVARIANT = "invariant"  # two backends of one run
    BASELINE = "baseline"  # this checkout against a revision (--against, --aa)


@dataclasses.dataclass(frozen=True)
class PairedDecision:
    """A baseline comparison of one cell from interleaved blocks."""

    ratio: float  # median over blocks of candidate block median / baseline block median
    low: float  # one-sided lower bound of that median ratio (-inf: too few blocks for one)
    difference_s: float  # median over blocks of candidate - baseline block medians
    suspect: bool  # low > 1 + delta and difference above the floor
    detectable: float = float("nan")  # smallest slowdown factor this measurement would flag
    blocks: int = 0  # the paired blocks behind it


@dataclasses.dataclass(frozen=True)
class CountFinding:
    """One gated count of a count rule: expected, measured, and what grew."""

    key: str
    limit: float
    value: float | None  # None: the probe gave no number (``missing`` says why)
    grown: tuple[tuple[str, float, float], ...] = ()  # (name, before, after), largest first
    missing: str = ""

    @property
    def exceeded(self) -> bool:
        return self.value is None or self.value > self.limit + TOLERANCE

    @property
    def fewer(self) -> bool:
        return self.value is not None and self.value < self.limit - TOLERANCE


@dataclasses.dataclass(frozen=True)
class RatioFinding:
    """One interleaved measurement of an invariant: the median over blocks of
    slower block median / faster block median, and its two-sided interval, against the
    threshold."""

    point: float
    low: float  # -inf / inf: too few blocks for a bound at this confidence
    high: float
    threshold: float
    at_most: bool  # ``within``: the ratio must stay at or below the threshold
    blocks: int
    slower_samples: int
    faster_samples: int
    confidence: float
    why: str = ""

    @property
    def outcome(self) -> Outcome:
        """``factor``: pass when the whole interval is >= the threshold, fail when all of
        it is below; ``within``: pass when all of it is <= the threshold, fail when all
        of it is above; inconclusive when it straddles the threshold."""
        if self.at_most:
            passed, failed = self.high <= self.threshold, self.low > self.threshold
        else:
            passed, failed = self.low >= self.threshold, self.high < self.threshold
        return Outcome.PASS if passed else Outcome.FAIL if failed else Outcome.INCONCLUSIVE


@dataclasses.dataclass(frozen=True)
class BaselineFinding:
    """A baseline comparison: the interleaved measurement, then the confirming re-run in
    fresh processes when the first was suspect."""

    delta: float
    floor_s: float
    confidence: float
    measurements: tuple[PairedDecision, ...]

    @property
    def confirmed(self) -> bool:
        return len(self.measurements) > 1 and self.measurements[-1].suspect


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The decision on one rule and the findings behind it (numbers, not text).

    ``reason`` says why a rule was not decided on numbers: its cell failed or was not
    measured, or ran while the machine was busy."""

    kind: Kind
    rule: str
    outcome: Outcome
    counts: tuple[CountFinding, ...] = ()
    ratios: tuple[RatioFinding, ...] = ()  # an invariant's measurement, then its re-run
    baseline: BaselineFinding | None = None
    reason: str = ""
    # a baseline comparison: what differs between the two sides' facts (None: not known)
    differences: tuple[Difference, ...] | None = None
    explain_error: str = ""  # why the facts of a side could not be had


def find_record(
    records: Iterable[Record],
    scenario: str,
    backend: str,
    size: str,
    dtype: str | None,
    cache: str = WARM,
) -> Record | None:
    """The record of a rule's cell; rules compare like with like: warm records (what the
    gate measures) unless a rule names the cache mode."""
    for record in records:
        if (record.scenario, record.backend, record.size) == (scenario, backend, size) and (
            (dtype is None or record.dtype == dtype) and record.cache == cache
        ):
            return record
    return None


def _grown(expected: Mapping[str, float], actual: Mapping[str, float]) -> tuple:
    """(name, before, after) of every name whose count went up (new names count from 0),
    largest increase first."""
    growth = [
        (name, expected.get(name, 0.0), value)
        for name, value in actual.items()
        if value > expected.get(name, 0.0) + TOLERANCE
    ]
    return tuple(sorted(growth, key=lambda item: item[1] - item[2]))


def check_counts(rules: Sequence[CountRule], records: Sequence[Record]) -> list[Verdict]:
    """Every count of every rule: fail when a per-call count exceeds its expectation."""
    verdicts = []
    for rule in rules:
        record = find_record(records, rule.scenario, rule.backend, rule.size, rule.dtype)
        if record is None or record.status != "ok":
            why = "not measured" if record is None else f"{record.status}: {record.error}"
            verdicts.append(Verdict(Kind.COUNT, rule.label, Outcome.FAIL, reason=f"cell {why}"))
            continue
        actual = record.counts.per_call()
        breakdowns = record.counts.breakdowns()
        findings = []
        for key, limit in rule.limits.items():
            value = actual.get(key)
            missing = (record.counts.error_text() or "probe not run") if value is None else ""
            grown: tuple = ()
            breakdown = KEYS[key].breakdown
            if value is not None and value > limit + TOLERANCE and breakdown is not None:
                grown = _grown(getattr(rule, breakdown), breakdowns[breakdown])
            findings.append(CountFinding(key, limit, value, grown, missing))
        outcome = Outcome.FAIL if any(f.exceeded for f in findings) else Outcome.PASS
        verdicts.append(Verdict(Kind.COUNT, rule.label, outcome, counts=tuple(findings)))
    return verdicts


def count_expectation(record: Record) -> dict:
    """A ``[[count]]`` table (for the counts file) from a measured record; breakdowns by
    name, so that re-measuring changes only the lines whose counts changed (in the trace's
    order, every `--update-counts` reordered them)."""
    actual = record.counts.per_call()
    table = {
        "scenario": record.scenario,
        "backend": record.backend,
        "size": record.size,
        "dtype": record.dtype,
    }
    table.update({key: _tidy(actual[key]) for key in GATED if actual.get(key) is not None})
    for name, breakdown in record.counts.breakdowns().items():
        table[name] = {key: _tidy(value) for key, value in sorted(breakdown.items())}
    return table


def _tidy(value: float) -> float | int:
    """Whole counts as integers (they read better in the counts file)."""
    return int(value) if float(value).is_integer() else value


def block_ratios(
    baseline_blocks: Sequence[Sequence[float]], candidate_blocks: Sequence[Sequence[float]]
) -> np.ndarray:
    """Per interleaved block, the candidate's median over the baseline's (the paired
    ratios every time decision is taken on)."""
    if len(baseline_blocks) != len(candidate_blocks):
        raise ValueError(
            f"paired blocks differ in number: {len(baseline_blocks)} vs {len(candidate_blocks)}"
        )
    base = np.asarray([np.median(block) for block in baseline_blocks], dtype=np.float64)
    cand = np.asarray([np.median(block) for block in candidate_blocks], dtype=np.float64)
    return cand / base


def invariant_finding(
    invariant: Invariant,
    slower_blocks: Sequence[Sequence[float]],
    faster_blocks: Sequence[Sequence[float]],
    confidence: float,
) -> RatioFinding:
    """One interleaved measurement of an invariant: the median of the per-block ratios
    slower / faster and its exact two-sided interval at ``confidence``."""
    ratios = block_ratios(faster_blocks, slower_blocks)
    low, high = median_interval(ratios, confidence)
    at_most = invariant.within is not None
    return RatioFinding(
        float(np.median(ratios)),
        low,
        high,
        invariant.within if at_most else invariant.factor,
        at_most,
        len(ratios),
        sum(len(block) for block in slower_blocks),
        sum(len(block) for block in faster_blocks),
        confidence,
        invariant.why,
    )


def invariant_verdict(label: str, findings: Sequence[RatioFinding]) -> Verdict:
    """The first measurement decides, except that a failure must show again in the
    confirming re-run (fresh processes): a re-run that does not fail makes the rule
    inconclusive (two measurements disagree), never a pass."""
    first = findings[0].outcome
    if first == Outcome.FAIL and len(findings) > 1 and findings[-1].outcome != Outcome.FAIL:
        first = Outcome.INCONCLUSIVE
    return Verdict(Kind.INVARIANT, label, first, ratios=tuple(findings))


def paired_decision(
    baseline_blocks: Sequence[Sequence[float]],
    candidate_blocks: Sequence[Sequence[float]],
    delta: float,
    floor_s: float,
    confidence: float,
) -> PairedDecision:
    """Per block, the ratio of the candidate's to the baseline's median; the one-sided
    lower ``confidence`` bound of the median of these ratios (exact, distribution-free:
    an order statistic of the ratios, `scanbench.statistics.median_interval`) must exceed
    1 + delta, and the slowdown the floor, for the cell to be suspect. Too few blocks for
    a bound at this confidence (6 or fewer at 99%) leave the bound at -inf: never suspect.

    ``detectable`` is the smallest slowdown this measurement would have flagged: slowing
    every candidate call by a factor s scales the ratios and their lower bound by s, so
    relative to what was measured s must exceed (1 + delta) x ratio / low (and the added
    time must exceed the floor: s > 1 + floor / baseline median).

    The added time is paired too: the median over blocks of the candidate's block median
    minus the baseline's. The difference of the two sides' overall medians is not: on a
    machine whose speed drifts it once read -11 us for a real slowdown of +19 us."""
    ratios = block_ratios(baseline_blocks, candidate_blocks)
    ratio = float(np.median(ratios))
    low = median_interval(ratios, confidence, "greater")[0]
    base = np.asarray([np.median(block) for block in baseline_blocks])
    cand = np.asarray([np.median(block) for block in candidate_blocks])
    base_median = float(np.median(base))
    difference = float(np.median(cand - base))  # paired, as the ratios: drift cancels
    detectable = max(
        (1 + delta) * ratio / low if low > 0 else float("inf"),
        1 + floor_s / base_median if base_median > 0 else float("inf"),
    )
    suspect = low > 1 + delta and difference > floor_s
    return PairedDecision(ratio, low, difference, suspect, detectable, len(ratios))


def baseline_verdict(rule_label: str, finding: BaselineFinding) -> Verdict:
    """Fail only when the interleaved measurement and its confirming re-run are both
    suspect."""
    outcome = Outcome.FAIL if finding.confirmed else Outcome.PASS
    return Verdict(Kind.BASELINE, rule_label, outcome, baseline=finding)


def failing(verdicts: Iterable[Verdict], strict: bool = False) -> bool:
    """Whether the gate fails: a failed rule (or, ``strict``, an inconclusive one)."""
    bad = {Outcome.FAIL, Outcome.INCONCLUSIVE} if strict else {Outcome.FAIL}
    return any(verdict.outcome in bad for verdict in verdicts)

"""The gate measuring itself (``scanbench gate --aa N [--inject-slowdown F]``): per
``[[baseline]]`` rule, how often identical code on both sides failed (false alarms), how
often code really slowed by F did (detections), and the smallest slowdown each
measurement could have flagged.

Each repetition measures every rule with identical code on both sides and, with F > 1,
right after it with the candidate slowed by F (`scanbench.gate.serve.slowed`), so that
both see the same machine; each measurement in fresh workers, with its own seed, and a
suspect one confirmed by a re-run as the gate does. `Calibration.to_json` is what
``--json`` stores (with the machine and date); `summary` gives the table's numbers from
that stored form, for the CLI and for the manual's figure alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .decide import Outcome, Verdict
from .rules import BaselineRule

TRIAL_KEYS = ("ratio", "low", "difference_s", "suspect", "detectable", "blocks")


@dataclasses.dataclass(frozen=True)
class Calibration:
    """Per repetition, the verdicts on identical code (``verdicts``) and, when
    ``slowdown`` > 1, on code slowed by it (``slowed``)."""

    repetitions: int
    slowdown: float
    verdicts: tuple[tuple[Verdict, ...], ...]
    slowed: tuple[tuple[Verdict, ...], ...] = ()

    @property
    def failing_repetitions(self) -> int:
        """Repetitions in which identical code failed some rule (false alarms)."""
        return sum(any(v.outcome == Outcome.FAIL for v in run) for run in self.verdicts)

    @property
    def detecting_repetitions(self) -> int:
        """Repetitions in which the slowed code failed some rule (detections)."""
        return sum(any(v.outcome == Outcome.FAIL for v in run) for run in self.slowed)

    def to_json(self) -> dict[str, Any]:
        """Every measurement's numbers, per rule and repetition (JSON)."""
        rules: dict[str, dict[str, Any]] = {}
        for kind, runs in (("aa", self.verdicts), ("slowed", self.slowed)):
            for run in runs:
                for verdict in run:
                    rule = rules.setdefault(
                        verdict.rule, {"rule": verdict.rule, "aa": [], "slowed": []}
                    )
                    rule[kind].append(_trial(verdict))
        return {
            "repetitions": self.repetitions,
            "slowdown": self.slowdown,
            "rules": list(rules.values()),
        }


def _trial(verdict: Verdict) -> dict[str, Any]:
    finding = verdict.baseline
    measurements = [] if finding is None else finding.measurements
    trial: dict[str, Any] = {
        "outcome": str(verdict.outcome),
        "measurements": [{key: getattr(m, key) for key in TRIAL_KEYS} for m in measurements],
    }
    if finding is not None:
        trial.update(delta=finding.delta, floor_s=finding.floor_s, confidence=finding.confidence)
    if verdict.reason:
        trial["reason"] = verdict.reason
    return trial


@dataclasses.dataclass(frozen=True)
class RuleSummary:
    """One rule's row of the calibration table."""

    rule: str
    delta: float | None
    repetitions: int
    false_alarms: int
    suspect_first: int  # A/A first measurements suspect before their confirming re-run
    aa_ratio: float  # median candidate/baseline of the A/A first measurements
    caught: int | None  # None: no slowdown planted
    slowed_ratio: float | None  # median candidate/baseline of the planted first measurements
    detectable_median: float  # smallest slowdown a measurement would flag: median ...
    detectable_p90: float  # ... and 90th percentile over the A/A first measurements


def _median(values: Sequence[float]) -> float:
    return float(np.median(values)) if len(values) else float("nan")


def summary(data: Mapping[str, Any]) -> list[RuleSummary]:
    """The table's numbers per rule, from `Calibration.to_json`'s form."""
    rows = []
    for rule in data["rules"]:
        aa, slowed = rule["aa"], rule["slowed"]
        firsts = [trial["measurements"][0] for trial in aa if trial["measurements"]]
        planted = [trial["measurements"][0] for trial in slowed if trial["measurements"]]
        detectable = [m["detectable"] for m in firsts]
        rows.append(
            RuleSummary(
                rule=rule["rule"],
                delta=next((trial.get("delta") for trial in aa if "delta" in trial), None),
                repetitions=len(aa),
                false_alarms=sum(trial["outcome"] == Outcome.FAIL for trial in aa),
                suspect_first=sum(m["suspect"] for m in firsts),
                aa_ratio=_median([m["ratio"] for m in firsts]),
                caught=sum(trial["outcome"] == Outcome.FAIL for trial in slowed)
                if slowed
                else None,
                slowed_ratio=_median([m["ratio"] for m in planted]) if planted else None,
                detectable_median=_median(detectable),
                detectable_p90=float(np.percentile(detectable, 90)) if detectable else float("nan"),
            )
        )
    return rows


def worker_pairs(rules: Sequence[BaselineRule], default: int) -> dict[str, int]:
    """``{rule label: its worker pairs}``: a rule's own, else ``[settings]``' ``default``."""
    return {rule.label: rule.worker_pairs or default for rule in rules}


def table(data: Mapping[str, Any], pairs: Mapping[str, int] | None = None) -> str:
    """The calibration table (markdown) from `Calibration.to_json`'s form; with
    ``pairs`` (`worker_pairs`), a column of each rule's worker pairs."""
    slowdown = float(data["slowdown"])
    planted = slowdown != 1.0
    head = [
        "rule",
        "delta",
        *(["worker pairs"] if pairs is not None else []),
        "A/A false alarms",
        "A/A first measurements suspect",
        "A/A ratio (median)",
    ]
    if planted:
        head += [f"planted {slowdown:g}x caught", f"planted {slowdown:g}x measured (median)"]
    head += ["smallest slowdown caught (median; 90th percentile)"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for row in summary(data):
        cells = [
            row.rule,
            "-" if row.delta is None else f"{row.delta:g}",
            *([str(pairs.get(row.rule, "?"))] if pairs is not None else []),
            f"{row.false_alarms} of {row.repetitions}",
            f"{row.suspect_first} of {row.repetitions}",
            f"{row.aa_ratio:.3f}x",
        ]
        if planted:
            measured = "-" if row.slowed_ratio is None else f"{row.slowed_ratio:.3f}x"
            cells += [f"{row.caught} of {len(_slowed(data, row.rule))}", measured]
        cells += [f"{row.detectable_median:.3f}x; {row.detectable_p90:.3f}x"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _slowed(data: Mapping[str, Any], rule: str) -> list:
    return next(r["slowed"] for r in data["rules"] if r["rule"] == rule)

"""`scanbench compare`: the same cells, the same code, two environments (another jax, other
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
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.environments import Environment
from harness.gate import paired_decision
from harness.gate_rules import BaselineRule
from harness.interleave import CANDIDATE_ROOT, Side, measure_blocks
from harness.statistics import median_interval

SLOWER, FASTER, SAME = "slower", "faster", "no significant change"
NUMBERED = re.compile(r"\.\d+$")
COUNT_KEYS = ("dispatches", "kernels", "kernels_static", "launch_equivalent", "h2d", "d2h")


@dataclasses.dataclass(frozen=True)
class CellComparison:
    """One cell measured on both sides."""

    cell: str
    ratio: float  # B / A
    low: float  # two-sided interval of the ratio at the confidence level
    high: float
    verdict: str  # SLOWER | FASTER | SAME
    detail: str
    counts: Mapping[str, tuple[Any, Any]]  # changed per-call counts: name -> (A, B)
    breakdown: Mapping[str, tuple[float, float]]  # changed kernels/dispatches by name
    count_errors: tuple[str, ...] = ()


def _ratios(blocks: Mapping[str, list[list[float]]]) -> list[float]:
    import numpy as np

    base = [float(np.median(block)) for block in blocks["baseline"]]
    cand = [float(np.median(block)) for block in blocks["candidate"]]
    return [c / b for b, c in zip(base, cand, strict=True)]


def _verdict(rule, settings, blocks, seed) -> tuple[str, Any, Any]:
    confidence = settings["confidence"]
    slower = paired_decision(
        blocks["baseline"], blocks["candidate"], rule.delta, rule.floor_s, confidence, seed
    )
    faster = paired_decision(
        blocks["candidate"], blocks["baseline"], rule.delta, rule.floor_s, confidence, seed
    )
    verdict = SLOWER if slower.suspect else FASTER if faster.suspect else SAME
    return verdict, slower, faster


def compare_cell(
    rule: BaselineRule,
    sides: Mapping[str, Environment],
    settings: Mapping[str, Any],
    seed: int,
    timeout_s: float,
    root: Path = CANDIDATE_ROOT,
) -> CellComparison:
    """Interleaved blocks of A (``baseline``) and B (``candidate``), a verdict confirmed
    by a fresh re-run when it says *slower* or *faster*, and the counts of each side."""
    served = {
        side: Side(root, python=env.python, environ=dict(env.environ))
        for side, env in sides.items()
    }
    blocks, _ = measure_blocks(rule, served, settings, seed, timeout_s)
    verdict, slower, _ = _verdict(rule, settings, blocks, seed)
    detail = ""
    if verdict != SAME:  # as the gate does: a change must show twice, in fresh processes
        again, _ = measure_blocks(rule, served, settings, seed + 1, timeout_s)
        confirmed, _, _ = _verdict(rule, settings, again, seed + 1)
        if confirmed != verdict:
            detail = f"first measurement said {verdict}; the re-run did not confirm it"
            verdict = SAME
        else:
            detail = "confirmed by a re-run in fresh processes"
            blocks = {side: blocks[side] + again[side] for side in blocks}
    ratios = _ratios(blocks)
    low, high = median_interval(ratios, settings["confidence"], seed)
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
    from harness.runner import run_cell_in_worker
    from harness.selection import cell as selected_cell
    from harness.timing import TimingConfig

    cell = selected_cell(rule.scenario, rule.backend, rule.size, rule.dtype)
    per_side, errors = {}, []
    for side, env in sides.items():
        environ = {**os.environ, **env.environ, "PYTHONPATH": str(root)}
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


def _number(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def frame(comparisons: Sequence[CellComparison]):
    """One row per cell, formatted for the reports (pandas)."""
    import pandas as pd

    rows = []
    for c in comparisons:
        changed = "; ".join(
            f"{key} {_number(a)} -> {_number(b)}" for key, (a, b) in c.counts.items()
        ) or ("none" if not c.count_errors else "-")
        rows.append(
            {
                "cell": c.cell,
                "B / A": f"{c.ratio:.3f}",
                "interval": f"{c.low:.3f}-{c.high:.3f}",
                "verdict": c.verdict,
                "counts that changed (A -> B)": changed,
                "notes": "; ".join(x for x in (c.detail, *c.count_errors) if x),
            }
        )
    return pd.DataFrame(rows)


def _changes(comparisons: Sequence[CellComparison], top: int) -> list[tuple[str, list[str]]]:
    out = []
    for c in comparisons:
        if c.breakdown:
            ranked = sorted(c.breakdown.items(), key=lambda item: -abs(item[1][1] - item[1][0]))
            lines = [f"{name}: {_number(a)} -> {_number(b)}" for name, (a, b) in ranked[:top]]
            if len(ranked) > top:
                lines.append(f"... and {len(ranked) - top} more")
            out.append((f"What changed in {c.cell} (per call, A -> B; largest first):", lines))
    return out


def _heading(comparisons, sides, confidence, delta) -> tuple[str, list[str], str]:
    slower = [c for c in comparisons if c.verdict == SLOWER]
    head = f"B slower on {len(slower)} of {len(comparisons)} cells" if slower else "passed"
    described = [
        f"{name} = {env.describe()}"
        for name, env in zip("AB", (sides["baseline"], sides["candidate"]), strict=True)
    ]
    legend = (
        f"B / A: ratio of the per-block medians (interleaved blocks), its {confidence:.0%} "
        f"interval, and the verdict (a change beyond {delta:.0%} must show twice, in fresh "
        "processes); counts per call from a counts-only worker on each side."
    )
    return f"scanbench compare: {head}", described, legend


def markdown(comparisons, sides, confidence: float, delta: float, top: int = 8) -> str:
    """The comparison as markdown: sides, one row per cell, then what changed per cell."""
    title, described, legend = _heading(comparisons, sides, confidence, delta)
    lines = [f"## {title}", "", *(f"- {line}" for line in described), "", legend, ""]
    lines += [frame(comparisons).to_markdown(index=False, disable_numparse=True), ""]
    for caption, changes in _changes(comparisons, top):
        lines += [caption, "", *(f"- {line}" for line in changes), ""]
    return "\n".join(lines)


def html(comparisons, sides, confidence: float, delta: float, top: int = 8) -> str:
    """The same as a self-contained HTML page."""
    from html import escape

    title, described, legend = _heading(comparisons, sides, confidence, delta)
    body = [f"<h1>{escape(title)}</h1><ul>"]
    body += [f"<li>{escape(line)}</li>" for line in described]
    body += [f"</ul><p>{escape(legend)}</p>", frame(comparisons).to_html(index=False)]
    for caption, changes in _changes(comparisons, top):
        body += [f"<p>{escape(caption)}</p><ul>"]
        body += [f"<li>{escape(line)}</li>" for line in changes] + ["</ul>"]
    style = "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}"
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>scanbench '
        f"compare</title><style>{style}</style></head><body>{''.join(body)}</body></html>"
    )

"""The gate's text, written once from its structured verdicts: the gate's markdown
section, the calibration table (``--aa``) and the environment A/B (``scanbench ab``)
as markdown and HTML. Nothing here decides anything (`scanbench.gate.decide` does)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from ..counts import KEYS
from .calibration import Calibration, table
from .decide import (
    BaselineFinding,
    CountFinding,
    Outcome,
    PairedDecision,
    RatioFinding,
    Verdict,
)
from .explain import Difference

ORDER = {Outcome.FAIL: 0, Outcome.INCONCLUSIVE: 1, Outcome.PASS: 2}


# how an explanation names a per-call count (singular; `_many` makes the plural)
NOUNS = {
    "h2d": "host-to-device transfer",
    "d2h": "device-to-host transfer",
    "host_conversions": "host conversion",
    "compiles": "compilation",
    "traces": "trace",
    "dispatches": "dispatch",
    "launch_equivalent": "GPU launch equivalent",
    "kernels": "kernel",
}


def _many(noun: str, count: float) -> str:
    plural = noun + ("es" if noun.endswith(("ch", "sh", "s")) else "s")
    return f"{count:g} {noun if count == 1 else plural}"


def _count_problem(finding: CountFinding) -> str:
    if finding.value is None:
        return f"{finding.key}: no number ({finding.missing})"
    grew = finding.value - finding.limit
    noun = NOUNS.get(finding.key, finding.key)
    text = (
        f"{_many(noun, grew)} more per call than expected "
        f"({finding.key} {finding.limit:g} -> {finding.value:g})"
    )
    if finding.grown:
        grown = [f"{name} {before:g} -> {after:g}" for name, before, after in finding.grown[:5]]
        return f"{text}, in {', '.join(grown)}"
    if KEYS[finding.key].breakdown is not None:
        return f"{text}; its breakdown is unchanged"
    return f"{text}; `scanbench profile` shows where the transfers happen"


def _bytes(value: Any) -> str:
    if not isinstance(value, int | float):
        return str(value)
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:g} B"


def _difference(difference: Difference) -> str:
    """One difference between the sides, as a reviewer would say it (head vs base)."""
    before, after = difference.before, difference.after
    if difference.aspect == "counts":
        noun = NOUNS.get(difference.name, difference.name)
        if before is None or after is None:
            return f"{difference.name} per call {before} -> {after}"
        verb = "adds" if after > before else "removes"
        return f"head {verb} {_many(noun, abs(after - before))} per call ({before:g} -> {after:g})"
    if difference.aspect == "hlo":
        executable, _, what = difference.name.partition("/")
        if what in ("argument_bytes", "temp_bytes"):
            label = "arguments" if what == "argument_bytes" else "temporaries"
            return f"{executable}: {label} {_bytes(before)} -> {_bytes(after)}"
        if what == "fusions" or what.endswith("body kernels"):
            more = "more" if after > before else "fewer"
            place = (
                "" if what == "fusions" else f" in the body of {what.removesuffix(' body kernels')}"
            )
            noun = "fusions" if what == "fusions" else "kernels"
            return f"{executable}: {abs(after - before)} {more} {noun}{place} ({before} -> {after})"
        return f"{executable}: {what} {before} -> {after}"
    return f"{difference.name} {before!r} -> {after!r}"


def explanation(verdict: Verdict) -> str:
    """What differs between the two sides of a baseline comparison, counts first; says so
    when nothing did (a pure time change) or when the facts could not be had."""
    if verdict.differences is None:
        return f"not explained ({verdict.explain_error})" if verdict.explain_error else ""
    if not verdict.differences:
        return "no count, HLO or environment difference: a pure time change"
    shown = [_difference(d) for d in verdict.differences[:6]]
    more = len(verdict.differences) - len(shown)
    return "; ".join(shown) + (f"; and {more} more differences" if more > 0 else "")


def _counts(findings: Sequence[CountFinding]) -> str:
    problems = [_count_problem(f) for f in findings if f.exceeded]
    if problems:
        return "; ".join(problems)
    text = ", ".join(f"{f.key} {f.value:g}" for f in findings)
    fewer = [f"{f.key} {f.limit:g} -> {f.value:g}" for f in findings if f.fewer]
    if fewer:
        text += f" (fewer than expected: {', '.join(fewer)}; --update-counts locks it in)"
    return text


def _ratio(finding: RatioFinding) -> str:
    relation = "<=" if finding.at_most else ">="
    return (
        f"ratio {finding.point:.2f}x, {finding.confidence:.0%} CI [{finding.low:.2f}, "
        f"{finding.high:.2f}] vs {relation} {finding.threshold:g}x "
        f"({finding.blocks} interleaved blocks, {finding.slower_samples} and "
        f"{finding.faster_samples} samples)"
    )


def _ratios(findings: Sequence[RatioFinding]) -> str:
    """An invariant's measurement, its confirming re-run, then why the rule holds."""
    first, *again = findings
    text = _ratio(first)
    if again:
        text += f"; confirming re-run: {_ratio(again[-1])}"
        if again[-1].outcome != Outcome.FAIL:
            text += " (not confirmed)"
    return text + (f"; why: {first.why}" if first.why else "")


def paired(decision: PairedDecision, delta: float, floor_s: float, confidence: float) -> str:
    """One interleaved measurement of a baseline comparison."""
    return (
        f"candidate/baseline {decision.ratio:.3f}x, {confidence:.0%} lower bound "
        f"{decision.low:.3f} vs {1 + delta:.2f}; difference "
        f"{decision.difference_s * 1e6:+.1f} us (floor {floor_s * 1e6:g} us); "
        f"detects slowdowns from {decision.detectable:.3f}x"
    )


def _baseline(finding: BaselineFinding) -> str:
    first, *again = finding.measurements
    text = paired(first, finding.delta, finding.floor_s, finding.confidence)
    if again:
        text += "; confirming re-run: " + paired(
            again[0], finding.delta, finding.floor_s, finding.confidence
        )
        if not finding.confirmed:
            text += " (not confirmed)"
    return text


def describe(verdict: Verdict) -> str:
    """The numbers behind one verdict, as one line, led by what changed between the sides
    of a baseline comparison."""
    parts = [verdict.reason] if verdict.reason else []
    why = explanation(verdict)
    if why:
        parts.insert(0, why)
    if verdict.counts:
        parts.append(_counts(verdict.counts))
    if verdict.ratios:
        parts.append(_ratios(verdict.ratios))
    if verdict.baseline is not None:
        parts.append(_baseline(verdict.baseline))
    return "; ".join(parts)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(verdicts: Sequence[Verdict], title: str = "scanbench gate") -> str:
    """One section: the overall result, then a table of every rule (failures first)."""
    failed = [v for v in verdicts if v.outcome == Outcome.FAIL]
    unsure = [v for v in verdicts if v.outcome == Outcome.INCONCLUSIVE]
    head = "FAILED" if failed else "passed"
    summary = f"{len(verdicts)} rules: {len(failed)} failed, {len(unsure)} inconclusive"
    lines = [f"## {title}: {head}", "", summary, ""]
    if verdicts:
        lines += ["| outcome | kind | rule | numbers |", "| --- | --- | --- | --- |"]
        for v in sorted(verdicts, key=lambda v: ORDER[v.outcome]):
            lines.append(f"| {v.outcome} | {v.kind} | {v.rule} | {_cell(describe(v))} |")
        lines.append("")
    return "\n".join(lines)


def calibration_markdown(calibration: Calibration, pairs: Mapping[str, int] | None = None) -> str:
    """The false-alarm rate (and, with a planted slowdown, the detection rate), the table
    per rule (`scanbench.gate.calibration.table`, with each rule's worker ``pairs`` when
    given), then every repetition."""
    lines = [
        "## scanbench gate calibration",
        "",
        f"false alarms (identical code on both sides): **{calibration.failing_repetitions} "
        f"of {calibration.repetitions}** repetitions",
    ]
    if calibration.slowdown != 1.0:
        lines += [
            "",
            f"detections of a planted {calibration.slowdown:g}x slowdown: "
            f"**{calibration.detecting_repetitions} of {calibration.repetitions}** repetitions",
        ]
    lines += [
        "",
        "Each repetition = every [[baseline]] rule, interleaved, with fresh workers and its "
        "own seed; the smallest slowdown caught is what each A/A measurement could have "
        "flagged.",
        "",
        table(calibration.to_json(), pairs),
        "",
        "| repetition | code | rule | outcome | numbers |",
        "| --- | --- | --- | --- | --- |",
    ]
    planted = f"slowed {calibration.slowdown:g}x"
    for kind, runs in (("identical", calibration.verdicts), (planted, calibration.slowed)):
        for index, verdicts in enumerate(runs):
            lines += [
                f"| {index} | {kind} | {v.rule} | {v.outcome} | {_cell(describe(v))} |"
                for v in verdicts
            ]
    return "\n".join([*lines, ""])


# ------------------------------------------------------------ environment A/B


def number_text(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def comparison_frame(comparisons: Sequence[Any]):
    """One row per cell of `scanbench.gate.two_environments.CellComparison` (pandas)."""
    import pandas as pd

    rows = []
    for c in comparisons:
        changed = "; ".join(
            f"{key} {number_text(a)} -> {number_text(b)}" for key, (a, b) in c.counts.items()
        ) or ("none" if not c.count_errors else "-")
        rows.append(
            {
                "cell": c.cell,
                "B / A": f"{c.ratio:.3f}",
                "interval": f"{c.low:.3f}-{c.high:.3f}",
                "verdict": str(c.verdict),
                "counts that changed (A -> B)": changed,
                "notes": "; ".join(x for x in (c.detail, *c.count_errors) if x),
            }
        )
    return pd.DataFrame(rows)


def _changes(comparisons: Sequence[Any], top: int) -> list[tuple[str, list[str]]]:
    out = []
    for c in comparisons:
        if c.breakdown:
            ranked = sorted(c.breakdown.items(), key=lambda item: -abs(item[1][1] - item[1][0]))
            lines = [
                f"{name}: {number_text(a)} -> {number_text(b)}" for name, (a, b) in ranked[:top]
            ]
            if len(ranked) > top:
                lines.append(f"... and {len(ranked) - top} more")
            out.append((f"What changed in {c.cell} (per call, A -> B; largest first):", lines))
    return out


def _heading(
    comparisons: Sequence[Any], sides: Mapping[str, Any], confidence: float, delta: float
) -> tuple[str, list[str], str]:
    slower = [c for c in comparisons if c.verdict == "slower"]
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
    return f"scanbench ab: {head}", described, legend


def comparison_markdown(
    comparisons: Sequence[Any], sides: Mapping[str, Any], confidence: float, delta: float, top=8
) -> str:
    """The A/B as markdown: sides, one row per cell, then what changed per cell."""
    title, described, legend = _heading(comparisons, sides, confidence, delta)
    lines = [f"## {title}", "", *(f"- {line}" for line in described), "", legend, ""]
    lines += [comparison_frame(comparisons).to_markdown(index=False, disable_numparse=True), ""]
    for caption, changes in _changes(comparisons, top):
        lines += [caption, "", *(f"- {line}" for line in changes), ""]
    return "\n".join(lines)


def comparison_html(
    comparisons: Sequence[Any], sides: Mapping[str, Any], confidence: float, delta: float, top=8
) -> str:
    """The same as a self-contained HTML page."""
    title, described, legend = _heading(comparisons, sides, confidence, delta)
    body = [f"<h1>{escape(title)}</h1><ul>"]
    body += [f"<li>{escape(line)}</li>" for line in described]
    body += [f"</ul><p>{escape(legend)}</p>", comparison_frame(comparisons).to_html(index=False)]
    for caption, changes in _changes(comparisons, top):
        body += [f"<p>{escape(caption)}</p><ul>"]
        body += [f"<li>{escape(line)}</li>" for line in changes] + ["</ul>"]
    style = "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}"
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>scanbench '
        f"compare</title><style>{style}</style></head><body>{''.join(body)}</body></html>"
    )

"""The text of a bisection (``scanbench bisect``): what is searched, each step with its
evidence as it is taken, and the conclusion, written from the numbers of
`scanbench.history.bisection`; what changed at the commit found is explained as the gate
explains a regression (`scanbench.gate.render.explanation`).
"""

from __future__ import annotations

from ..gate.decide import Kind, Outcome, Verdict
from ..gate.render import explanation
from .bisection import Bisect, CountEvidence, Mode, Result, Role, Status, Step
from .series import commit_url


def header(search: Bisect) -> str:
    """What is searched for, how, and over which commits."""
    if search.time is None:
        how = "counts per call (exact, binary search)"
    else:
        how = (
            f"time: slower than GOOD by more than {search.time.factor:g}x, each step the "
            f"gate's paired interleaved comparison against GOOD ({search.time.retries} "
            "re-measurements at most while undecided)"
        )
    return (
        f"scanbench bisect {search.rule.label}: {how}; {len(search.revisions)} commits on "
        f"BAD's first-parent line after GOOD {search.good.short} up to BAD {search.bad.short}"
    )


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _evidence(step: Step) -> str:
    evidence = step.evidence
    if step.error:
        return f"could not be measured: {step.error}"
    if isinstance(evidence, CountEvidence):
        if step.role == Role.GOOD:
            return "counts per call: " + ", ".join(
                f"{key} {_number(value)}"
                for key, value in evidence.counts.items()
                if key
                in (
                    "dispatches",
                    "kernels",
                    "launch_equivalent",
                    "h2d",
                    "d2h",
                    "host_conversions",
                    "compiles",
                    "traces",
                )
            )
        if not evidence.differs:
            return "counts per call as at GOOD"
        return "differs from GOOD: " + ", ".join(
            f"{key} {_number(a)} -> {_number(b)}" for key, a, b in evidence.differs
        )
    last = evidence.decisions[-1]
    text = (
        f"this/GOOD {last.ratio:.3f}x, {evidence.confidence:.0%} bounds [{last.low:.3f}, "
        f"{evidence.uppers[-1]:.3f}] vs {evidence.factor:g}x; difference "
        f"{last.difference_s * 1e6:+.1f} us (floor {evidence.floor_s * 1e6:g} us); "
        f"{evidence.blocks} blocks"
    )
    if len(evidence.decisions) > 1:
        text += f" over {len(evidence.decisions)} measurements"
    return text


def step_line(step: Step) -> str:
    """One measured revision and its evidence, as the search takes it."""
    name = step.role.upper() if step.role != Role.STEP else "step"
    many = "commit" if step.left == 1 else "commits"
    left = f" ({step.left} {many} in question)" if step.role == Role.STEP else ""
    subject = step.revision.subject[:60]
    return f'{name} {step.revision.short} "{subject}"{left}: {step.mark}: {_evidence(step)}'


def conclusion(result: Result, remote: str | None) -> str:
    """The commit found (linked when ``remote`` is a GitHub or GitLab repository) and
    what changed at it, or why none was pinned down."""
    what = "commit where the counts change" if result.mode == Mode.COUNTS else "slower commit"
    if result.status == Status.NO_CHANGE:
        if result.mode == Mode.COUNTS:
            return "no change: every count per call is the same at GOOD and BAD (use --time)"
        return "no change: BAD is not slower than GOOD by more than the factor"
    if result.status == Status.UNDECIDED and not result.candidates:
        return (
            "undecided: BAD's interval still straddles the factor after its re-measurements; "
            "nothing to search (measure on a quieter machine, with more blocks (--gates) or "
            "more --retries)"
        )
    if result.status != Status.FOUND:
        names = ", ".join(r.short for r in result.candidates)
        if result.status == Status.UNDECIDED:
            why = "a step stayed undecided"
            fix = "measure on a quieter machine, with more blocks (--gates) or more --retries"
        else:
            why, fix = "commits that could not be measured", "see why each was skipped above"
        return (
            f"not pinned down ({why}): the first {what} is one of {names} (after "
            f"{result.last_good.short}); {fix}"
        )
    first, parent = result.first, result.last_good
    url = commit_url(remote, first.sha)
    verdict = Verdict(
        Kind.BASELINE,
        result.cell,
        Outcome.FAIL,
        differences=result.differences,
        explain_error=result.explain_error,
    )
    lines = [
        f'first {what}: {first.sha} "{first.subject}" ({first.date})' + (f" {url}" if url else ""),
        f'its parent {parent.short} "{parent.subject[:60]}" is as at GOOD',
        f"what changed (head = {first.short}, base = {parent.short}): {explanation(verdict)}",
    ]
    return "\n".join(lines)

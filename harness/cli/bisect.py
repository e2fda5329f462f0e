"""``scanbench bisect GOOD BAD --cell SCENARIO/BACKEND/SIZE``: the first commit of the
range (BAD's first-parent line back to GOOD) where the cell's counts per call change, or
with ``--time`` where it became slower than GOOD by more than ``--factor``.

Each revision is measured in a git worktree of the repository scanbench runs in, by the
gate's served worker; times by the gate's paired interleaved comparison against GOOD
(``--gates FILE`` gives its settings: blocks, confidence, floor, worker pairs). Prints the
evidence of every step as it is taken, then the commit and what changed at it.
Exit 0: found; 1: GOOD and BAD do not differ; 3: not pinned down (a step stayed
undecided after its re-measurements, or the commits left could not be measured).
"""

from __future__ import annotations

import argparse

from ..api import InputError
from ..cells import cell
from ..gate.rules import BaselineRule, Settings, load_gates
from ..sources import resolve
from .options import number, positive

HELP = "find the commit where a cell's counts (or, --time, its time) changed"


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = commands.add_parser("bisect", help=HELP, description=HELP)
    parser.add_argument("good", metavar="GOOD", help="a revision where the cell was as wanted")
    parser.add_argument("bad", metavar="BAD", help="a later revision where it changed")
    parser.add_argument(
        "--cell",
        required=True,
        metavar="SCENARIO/BACKEND/SIZE",
        help="the cell (SCENARIO: a bundled scenario's name or a source such as "
        "bench/scenario.py:SCENARIO)",
    )
    parser.add_argument("--dtype", help="default: the scenario's first dtype")
    parser.add_argument(
        "--time", action="store_true", help="find where it became slower, not where counts changed"
    )
    parser.add_argument(
        "--factor",
        type=number(float, "--factor", 1.0),
        metavar="F",
        help="with --time: slower than GOOD by more than F x (> 1; default 1 + the gate's delta)",
    )
    parser.add_argument("--gates", metavar="FILE", help="a gate file whose [settings] to use")
    parser.add_argument(
        "--retries",
        type=number(int, "--retries", 0, 101, low_open=False),
        default=2,
        help="with --time: re-measurements of an undecided step, blocks pooled (default 2)",
    )
    parser.add_argument("--timeout", type=positive(float, "--timeout"), default=900.0)
    return parser


def _rule(args: argparse.Namespace):
    """The cell as a baseline rule (names checked), and the gate settings to use: those
    of ``--gates`` and the cell's own ``[[baseline]]`` rule there, if any."""
    parts = args.cell.rsplit("/", 2)
    if len(parts) != 3 or not all(parts):
        raise InputError(
            f"--cell {args.cell!r}: expected SCENARIO/BACKEND/SIZE, e.g. "
            "tridiagonal/scanned-time-major/smoke or bench/scenario.py:SCENARIO/mine/smoke"
        )
    if args.factor is not None and not args.time:
        raise InputError("--factor only works with --time (counts change exactly)")
    scenario, backend, size = parts
    measured = cell(scenario, backend, size, args.dtype)
    gates = load_gates(args.gates) if args.gates else None
    settings = gates.settings if gates else Settings()
    own = [
        rule
        for rule in (gates.baselines if gates else ())
        if resolve(rule.scenario) == measured.source
        and (rule.backend, rule.size) == tuple(parts[1:])
        and rule.dtype in (None, measured.dtype)
    ]
    base = own[0] if own else None
    delta = args.factor - 1 if args.factor else (base.delta if base else settings.delta)
    rule = BaselineRule(
        scenario,
        backend,
        size,
        delta,
        base.floor_s if base else settings.floor_s,
        measured.dtype,
        base.worker_pairs if base else None,
        base.blocks if base else None,
        measured.scenario,
    )
    return rule, settings


def run(args: argparse.Namespace) -> int:
    # git, JAX workers and SciPy: not for --help (start-up cost)
    from ..gate.interleave import project_root
    from ..history.bisection import Bisect, Status, TimeSettings
    from ..history.bisection import resolve as revision

    rule, settings = _rule(args)
    repository = project_root()
    good = revision(repository, args.good, "GOOD")
    bad = revision(repository, args.bad, "BAD")
    time = TimeSettings(1 + rule.delta, settings, args.retries, args.timeout) if args.time else None
    search = Bisect(rule, repository, good, bad, time, args.timeout, _print_step)
    print(_header(search), flush=True)
    result = search.run()
    print(_conclusion(result, _remote(repository)))
    return {Status.FOUND: 0, Status.NO_CHANGE: 1}.get(result.status, 3)


def _print_step(step) -> None:
    print(_step(step), flush=True)


def _remote(repository) -> str | None:
    """The remote's URL without its credentials (it is printed)."""
    from ..credentials import public_url
    from ..history.bisect import git

    done = git(repository, "remote", "get-url", "origin")
    return public_url(done.stdout.strip()) if done.returncode == 0 else None


def _header(search) -> str:
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


def _number(value) -> str:
    return "-" if value is None else f"{value:g}"


def _evidence(step) -> str:
    from ..history.bisection import CountEvidence, Role  # SciPy: not at start-up

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


def _step(step) -> str:
    from ..history.bisection import Role  # SciPy: not at start-up

    name = step.role.upper() if step.role != Role.STEP else "step"
    many = "commit" if step.left == 1 else "commits"
    left = f" ({step.left} {many} in question)" if step.role == Role.STEP else ""
    subject = step.revision.subject[:60]
    return f'{name} {step.revision.short} "{subject}"{left}: {step.mark}: {_evidence(step)}'


def _conclusion(result, remote: str | None) -> str:
    # the gate's decisions and SciPy: not at start-up
    from ..gate.decide import Kind, Outcome, Verdict
    from ..gate.render import explanation
    from ..history.bisection import Mode, Status
    from ..history.series import commit_url

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

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
import subprocess

from ..api import InputError
from ..cells import cell
from ..credentials import public_url
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
    from ..gate.interleave import project_root
    from ..history import bisection, bisection_text

    rule, settings = _rule(args)
    repository = project_root()
    good = bisection.resolve(repository, args.good, "GOOD")
    bad = bisection.resolve(repository, args.bad, "BAD")
    time = (
        bisection.TimeSettings(1 + rule.delta, settings, args.retries, args.timeout)
        if args.time
        else None
    )

    def show(step: bisection.Step) -> None:
        print(bisection_text.step_line(step), flush=True)

    search = bisection.Bisect(rule, repository, good, bad, time, args.timeout, show)
    print(bisection_text.header(search), flush=True)
    result = search.run()
    print(bisection_text.conclusion(result, _remote(repository)))
    return {bisection.Status.FOUND: 0, bisection.Status.NO_CHANGE: 1}.get(result.status, 3)


def _remote(repository) -> str | None:
    """The remote's URL without its credentials (it is printed)."""
    done = subprocess.run(
        ["git", "remote", "get-url", "origin"],  # noqa: S607 (git from PATH, as everywhere)
        cwd=repository,
        capture_output=True,
        text=True,
    )
    return public_url(done.stdout.strip()) if done.returncode == 0 else None

"""``scanbench history add | report``: keep runs across commits, and draw their trends.

``add`` appends results files to a history directory (one file per run, named by the
run's content: adding a run twice stores it once; nothing stored is ever rewritten); a
file that cannot be added is named with the reason on one line and the others are still
added (exit 1 then). ``report`` writes the static dashboard (HTML) and its markdown
summary: counts per call as exact steps, times with change points, per cell and series.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..api import InputError
from ..extras import require
from ..history import archive, series
from ..history.archive import DEFAULT_DIRECTORY, Outcome, add
from ..history.series import MIN_FACTOR
from ..safe_files import output_path, outputs_apart, write_text_atomic
from .options import number

HELP = "history across commits: add runs to it, write its dashboard"


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = commands.add_parser("history", help=HELP, description=HELP)
    actions = parser.add_subparsers(dest="history_command", required=True, metavar="ACTION")
    add = actions.add_parser(
        "add",
        help="append results files to the history",
        description="Append runs to the history, keyed by commit, branch, machine and "
        "environment. A run measured on a tree with uncommitted changes is skipped.",
    )
    add.add_argument("results", nargs="+", metavar="RESULTS", help="results files (JSON)")
    add.add_argument("--history", default=DEFAULT_DIRECTORY, metavar="DIR", help=_where())
    add.add_argument(
        "--machine",
        metavar="NAME",
        help="the machine's name in the history (default: its hostname; CI runners get a "
        "new hostname per job, so name them, e.g. --machine gha-ubuntu-x64)",
    )
    add.add_argument(
        "--branch", help="the branch the run belongs to (default: the one it recorded)"
    )
    report = actions.add_parser(
        "report",
        help="write the dashboard (HTML) and its markdown summary",
        description="Per cell and series (machine, environment, branch): the median time "
        "and its interval by commit with change points, and the counts per call as exact "
        "steps; the detected changes newest first.",
    )
    report.add_argument("--history", default=DEFAULT_DIRECTORY, metavar="DIR", help=_where())
    report.add_argument("--html", required=True, metavar="PATH", help="the dashboard")
    report.add_argument("--md", metavar="PATH", help="also write the markdown summary here")
    report.add_argument(
        "--branch", action="append", default=[], help="only this branch (repeatable)"
    )
    report.add_argument(
        "--min-change",
        type=number(float, "--min-change", 1.0),
        default=MIN_FACTOR,
        metavar="F",
        help="a time change point must move the level by at least this factor (> 1; "
        f"default {MIN_FACTOR:g})",
    )
    report.add_argument("--title", default="scanbench history", help="the page's title")
    report.add_argument(
        "--github",
        action="store_true",
        help="also append the summary to the GitHub job summary ($GITHUB_STEP_SUMMARY), "
        "cut to fit GitHub's 1 MiB per step",
    )
    return parser


def _where() -> str:
    return f"the history directory (default {DEFAULT_DIRECTORY})"


def run(args: argparse.Namespace) -> int:
    return _add(args) if args.history_command == "add" else _report(args)


def _add(args: argparse.Namespace) -> int:
    done = add(args.results, args.history, args.machine, args.branch)
    for item in done:
        if item.entry is not None:
            entry = item.entry  # as stored: an added run is never renamed
            what = f"commit {entry.commit.short}, {entry.branch or 'no branch'}, "
            cells = len(entry.cells)
            what += f"{entry.machine.name}, {cells} cell{'' if cells == 1 else 's'}"
            asked = (args.machine or entry.machine.name, args.branch or entry.branch)
            renamed = asked != (entry.machine.name, entry.branch)
            note = "; added before: --machine and --branch do not rename it" if renamed else ""
            print(f"{item.outcome}: {item.path} -> {item.detail} ({what}{note})")
        else:
            print(f"skipped {item.path}: {item.detail}", file=sys.stderr)
    return 1 if any(item.outcome == Outcome.SKIPPED for item in done) else 0


def _outside(args: argparse.Namespace) -> None:
    """Refuse a dashboard or summary written over the other, or into the history directory
    (over an entry, or as a file every later report would name as no entry)."""
    outputs = {"--html": args.html, "--md": args.md}
    outputs_apart(outputs, [])
    history = os.path.realpath(args.history)
    for option, path in outputs.items():
        if path and os.path.dirname(output_path(path)) == history:
            raise InputError(
                f"{option} {path} is in the history directory {args.history}, where every "
                "file is read as an entry; give a path outside it"
            )


def _report(args: argparse.Namespace) -> int:
    _outside(args)
    # the dashboard's figures (`plots`) and the change points of times (`changepoints`):
    # one line naming the extra, before anything is read
    require("matplotlib", "the history's dashboard")
    require("ruptures", "the history's change points")
    from ..history import changes, dashboard, summary

    history = archive.load(args.history)
    for path, reason in history.skipped:
        print(f"skipped {path}: {reason}", file=sys.stderr)
    timeline = series.timeline(history, args.branch)
    detected = changes.detect(timeline, args.min_change)
    root = Path.cwd()  # the bisect commands the report suggests run from here
    text = summary.markdown(timeline, detected, root)
    page = dashboard.page(timeline, detected, args.title, root, args.min_change)
    write_text_atomic(args.html, page)
    if args.md:
        write_text_atomic(args.md, text)
    if args.github and os.environ.get("GITHUB_STEP_SUMMARY"):
        from ..gate.github import append_summary

        append_summary(os.environ["GITHUB_STEP_SUMMARY"], text)
    print(text)
    print(f"dashboard: {args.html}" + (f"; summary: {args.md}" if args.md else ""), file=sys.stderr)
    return 0

"""``scanbench report``: the markdown and HTML reports of stored runs (several machines
and devices side by side); never re-runs anything."""

from __future__ import annotations

import argparse
import sys

from ..extras import check_html
from ..safe_files import outputs_apart

HELP = "render stored results (never re-runs)"


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = commands.add_parser("report", help=HELP, description=HELP)
    parser.add_argument("results", nargs="+", help="results JSON files")
    parser.add_argument("--md", help="write markdown here (default: print it)")
    parser.add_argument("--html", help="also write the self-contained HTML report (with plots)")
    parser.add_argument(
        "--mixed-versions",
        action="store_true",
        help="compare runs on the same device even when their jax versions differ",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    from scanbench.reports import comparable, written

    outputs_apart({"--md": args.md, "--html": args.html}, args.results)
    check_html(args.html)
    runs, apart = comparable.load_runs(args.results)
    markdown = written.write_reports(
        runs, apart, args.md, args.html, mixed_versions=args.mixed_versions
    )
    for path in (args.md, args.html):
        if path:
            print(f"report: {path}", file=sys.stderr)
    if not args.md:
        print(markdown)
    return 0

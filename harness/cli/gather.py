"""``scanbench gather``: merge the shards of a run (``scanbench run --shard K/N``) into one
results file, with its markdown and HTML reports; say which cells each machine measured."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..extras import check_html
from ..safe_files import outputs_apart

HELP = "merge the shards of a run into one results file"


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "gather",
        help=HELP,
        description=HELP + ". Refuses a missing shard, a shard given twice, an unfinished "
        "shard, and shards of different runs or scenario versions.",
    )
    parser.add_argument(
        "shards",
        nargs="+",
        metavar="SHARD",
        help="a shard's results file, or a folder of them (searched for *.json)",
    )
    parser.add_argument("--out", required=True, help="the merged results JSON path")
    parser.add_argument("--force", action="store_true", help="overwrite an existing --out")
    parser.add_argument("--md", help="also write the markdown report to this path")
    parser.add_argument("--html", help="also write the HTML report (with plots) to this path")
    parser.add_argument("--quiet", action="store_true", help="do not print the markdown table")
    return parser


def run(args: argparse.Namespace) -> int:
    from ..execution.gathering import gather_into, shard_files
    from .run import finish  # the reports: written as `scanbench run` writes them

    out = Path(args.out)
    outputs = {"--out": args.out, "--md": args.md, "--html": args.html}
    outputs_apart(outputs, shard_files(args.shards))  # no report over a shard or the merged run
    check_html(args.html)
    for line in gather_into(args.shards, out, args.force):
        print(line, file=sys.stderr)
    return finish(None, out, args)

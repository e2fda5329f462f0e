"""``scanbench profile``: trace one cell in a fresh worker, keep the Perfetto/XProf trace
and print its counts and busiest kernels."""

from __future__ import annotations

import argparse
from pathlib import Path

from scanbench.reports.traced_call import render

from ..api import HarnessError, InputError
from ..cells import select
from ..counts import Counts
from ..trace_route import TraceFiles
from .options import cell_options, params, positive, scenarios

HELP = "write a Perfetto/XProf trace of one cell and summarise its counts"


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "profile",
        help=HELP,
        description=HELP,
        parents=[cell_options("smoke", "size name (default: smoke)")],
    )
    parser.add_argument("--out", help="trace directory (default results/profile-<cell>)")
    parser.add_argument("--top", type=int, default=10, help="kernels to list (default 10)")
    parser.add_argument("--timeout", type=positive(float, "--timeout"), default=1800.0)
    return parser


def run(args: argparse.Namespace) -> int:
    from ..execution.launcher import profile_in_worker

    if not scenarios(args):
        raise InputError("profile needs --scenario NAME (or a source) or --scenario-file PATH")
    if len(args.backend) != 1:
        raise InputError("profile traces one cell: give exactly one --backend")
    cells = select(scenarios(args), args.backend, args.size, args.dtype, args.seed, params(args))
    if len(cells) != 1:
        raise InputError(f"profile traces one cell; these select {len(cells)}")
    (cell,) = cells
    out = Path(args.out or f"results/profile-{cell.scenario}-{cell.backend}-{cell.size}")
    out.mkdir(parents=True, exist_ok=True)
    counts = Counts.from_json(profile_in_worker(cell, str(out.resolve()), args.timeout))
    if "trace" in counts.errors:
        raise HarnessError(f"the trace of {cell.label} failed: {counts.errors['trace']}")
    print(render(counts, cell.label, TraceFiles.found(out), args.top))
    return 0

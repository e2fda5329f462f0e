"""``scanbench ab``: the same cells and code in two environments (another jax, other
XLA flags), interleaved in randomized blocks as the gate measures, with their counts."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from ..cells import select
from ..gate.rules import Settings, load_gates
from ..safe_files import write_text_atomic
from .gate import DEFAULT_GATES
from .options import cell_options, params, positive, scenarios

HELP = "same cells, same code, two environments (another jax, other XLA_FLAGS)"


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "ab",
        help=HELP,
        description="Time the selected cells in two environments A and B, interleaved in "
        "randomized blocks (the gate's method), and compare their counts. Exit 1 when a cell "
        "is significantly slower on B.",
        parents=[cell_options("smoke", "one size name (default: smoke)")],
    )
    for side in ("a", "b"):
        name = side.upper()
        parser.add_argument(
            f"--{side}-python", metavar="PATH", help=f"side {name}'s interpreter (a venv's)"
        )
        parser.add_argument(
            f"--{side}-requirements",
            action="append",
            default=[],
            metavar="REQ",
            help=f"side {name}: install these (e.g. 'jax==0.10.0') with this project into "
            "a cached venv; repeatable",
        )
        parser.add_argument(
            f"--{side}-env",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help=f"side {name}: an environment variable (e.g. XLA_FLAGS=...); repeatable",
        )
    parser.add_argument(
        "--gates",
        default=DEFAULT_GATES,
        help="the gate file whose [settings] (blocks, confidence, delta, ...) are used "
        f"(default {DEFAULT_GATES}; the defaults when it does not exist)",
    )
    parser.add_argument("--blocks", type=positive(int, "--blocks"), help="override")
    parser.add_argument("--md", help="also write the markdown here")
    parser.add_argument("--html", help="also write an HTML page here")
    parser.add_argument("--timeout", type=positive(float, "--timeout"), default=900.0)
    return parser


def run(args: argparse.Namespace) -> int:
    from ..gate import environments, render, two_environments

    cells = select(scenarios(args), args.backend, args.size, args.dtype, args.seed, params(args))
    # only the [settings] are read: without a gate file (the default's missing), defaults
    missing_default = args.gates == DEFAULT_GATES and not Path(args.gates).exists()
    settings = Settings() if missing_default else load_gates(args.gates).settings
    if args.blocks:
        settings = dataclasses.replace(settings, blocks=args.blocks)
    a, b = (
        two_environments.SideSpec(
            side.upper(),
            getattr(args, f"{side}_python"),
            tuple(getattr(args, f"{side}_requirements")),
            environments.parse_assignments(getattr(args, f"{side}_env"), f"--{side}-env"),
        )
        for side in ("a", "b")
    )
    comparisons, sides = two_environments.compare_environments(cells, a, b, settings, args.timeout)
    text = render.comparison_markdown(comparisons, sides, settings.confidence, settings.delta)
    print(text)
    if args.md:
        write_text_atomic(args.md, text)
    if args.html:
        page = render.comparison_html(comparisons, sides, settings.confidence, settings.delta)
        write_text_atomic(args.html, page)
    return 1 if any(c.verdict == two_environments.Change.SLOWER for c in comparisons) else 0

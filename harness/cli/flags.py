"""``scanbench flags``: the curated XLA options of the platform, each measured against a
cell's current flags in paired, interleaved blocks, then the faster ones together."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from ..cells import select
from ..gate.rules import Settings, load_gates
from ..safe_files import write_text_atomic
from .gate import DEFAULT_GATES
from .options import cell_options, params, positive, scenarios

HELP = "measure XLA's options on cells: each against the current flags, then the winners"


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "flags",
        help=HELP,
        description="For each selected cell, an environment A/B per curated XLA option of "
        "the platform (A: the cell's flags now; B: with the option on top), interleaved "
        "in randomized blocks, a change confirmed in fresh processes; then the faster "
        "options together, and the XLA_FLAGS line to use. Options the installed jaxlib "
        "refuses, or would silently ignore, are listed instead of measured.",
        parents=[cell_options("smoke", "one size name (default: smoke)")],
    )
    parser.add_argument(
        "--candidate",
        action="append",
        default=[],
        metavar="NAME",
        help="only this candidate (repeatable; `--list` shows them)",
    )
    parser.add_argument(
        "--platform",
        choices=("cpu", "gpu"),
        help="whose candidates (default: the platform JAX starts on)",
    )
    parser.add_argument("--list", action="store_true", help="list the candidates and exit")
    parser.add_argument("--python", metavar="PATH", help="the interpreter (default: this one)")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable of both sides (e.g. XLA_FLAGS=...); repeatable",
    )
    parser.add_argument(
        "--gates",
        default=DEFAULT_GATES,
        help=f"the gate file whose [settings] are used (default {DEFAULT_GATES}, if it exists)",
    )
    parser.add_argument("--blocks", type=positive(int, "--blocks"), help="override")
    parser.add_argument("--md", help="also write the markdown here")
    parser.add_argument("--timeout", type=positive(float, "--timeout"), default=900.0)
    return parser


def run(args: argparse.Namespace) -> int:
    from ..gate import environments, flag_search

    if args.list:
        for candidate in flag_search.candidates(args.platform or "cpu", args.candidate):
            print(f"{candidate.name}: {' '.join(candidate.flags)}\n    {candidate.what}")
        return 0
    if args.platform:
        flag_search.candidates(args.platform, args.candidate)  # unknown: exit 2 before measuring
    cells = select(scenarios(args), args.backend, args.size, args.dtype, args.seed, params(args))
    missing_default = args.gates == DEFAULT_GATES and not Path(args.gates).exists()
    settings = Settings() if missing_default else load_gates(args.gates).settings
    if args.blocks:
        settings = dataclasses.replace(settings, blocks=args.blocks)
    side = flag_search.SideSpec(
        "A", args.python, (), environments.parse_assignments(args.env, "--env")
    )
    result = flag_search.search(cells, side, settings, args.timeout, args.candidate, args.platform)
    text = flag_search.markdown(result, settings.confidence, settings.delta)
    print(text)
    if args.md:
        write_text_atomic(args.md, text)
    return 0

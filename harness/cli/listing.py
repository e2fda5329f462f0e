"""``scanbench list``: the scenarios, their sizes and backends (with strategies and
parameters)."""

from __future__ import annotations

import argparse

from scanbench.reports.catalogue import render

from ..sources import catalogue, file_source, load

HELP = "scenarios, their backends and sizes"


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = commands.add_parser("list", help=HELP, description=HELP)
    parser.add_argument("--scenario-file", help="also list the SCENARIO in this file")
    return parser


def run(args: argparse.Namespace) -> int:
    scenarios = [load(source) for source in catalogue().values()]
    if args.scenario_file:
        scenarios.append(load(file_source(args.scenario_file)))
    print(render(scenarios))
    return 0

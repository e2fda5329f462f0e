"""``scanbench gate``: the regression gate over a gate file: exact counts, invariants
between two backends and ``--against REV`` (both interleaved, paired) and its
self-calibration."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from ..api import InputError
from ..environment import collect
from ..gate.rules import load_gates
from ..results import load_run
from ..safe_files import write_text_atomic
from .options import positive

HELP = "regression gate: exact counts, interleaved invariants, --against REV"
DEFAULT_GATES = "bench/gates.toml"
LEGACY_GATES = "gate/gates.toml"  # the earlier default


def gates_path(given: str) -> str:
    """The gate file to read: ``given``; when that is the default and missing while a gate
    file sits at the old default, a one-line error that names both (never a silent switch).
    """
    if given == DEFAULT_GATES and not Path(given).exists() and Path(LEGACY_GATES).exists():
        raise InputError(
            f"--gates: no {DEFAULT_GATES} here, but {LEGACY_GATES} exists (the earlier "
            f"default): move it to {DEFAULT_GATES} or pass --gates {LEGACY_GATES}"
        )
    return given


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = commands.add_parser("gate", help=HELP, description=HELP)
    parser.add_argument("--gates", default=DEFAULT_GATES, help="the gate file (TOML)")
    parser.add_argument("--results", help="check this stored run instead of measuring now")
    parser.add_argument(
        "--update-counts", action="store_true", help="measure and rewrite the counts file"
    )
    parser.add_argument("--against", metavar="REV", help="compare [[baseline]] rules with REV")
    parser.add_argument(
        "--aa",
        type=positive(int, "--aa"),
        metavar="N",
        help="self-calibration: this checkout on both sides, N repetitions",
    )
    parser.add_argument(
        "--inject-slowdown",
        type=positive(float, "--inject-slowdown"),
        default=1.0,
        metavar="F",
        help="(with --aa; for testing the gate) each repetition also measures the candidate "
        "side made really F x slower (extra work per call, F >= 1): the detection rate",
    )
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="(with --aa) store every measurement of the calibration, with the machine and "
        "date, for the manual's figure",
    )
    parser.add_argument("--strict", action="store_true", help="inconclusive invariants fail too")
    parser.add_argument("--md", help="also write the markdown section here")
    parser.add_argument(
        "--github",
        action="store_true",
        help="in GitHub Actions: the verdict also as the job summary ($GITHUB_STEP_SUMMARY, "
        "cut under 1 MiB), one annotation per failed or inconclusive rule, and step outputs "
        "($GITHUB_OUTPUT: verdict, passed, failed, inconclusive)",
    )
    parser.add_argument("--timeout", type=positive(float, "--timeout"), default=900.0)
    return parser


def run(args: argparse.Namespace) -> int:
    from ..gate import command, decide, github, render
    from ..gate.calibration import worker_pairs

    gates = load_gates(gates_path(args.gates))
    if args.inject_slowdown != 1.0 and not args.aa:
        raise InputError("--inject-slowdown only works with --aa (it is a test of the gate)")
    if args.json and not args.aa:
        raise InputError("--json only works with --aa (it stores the calibration)")
    if args.inject_slowdown < 1.0:
        raise InputError(
            f"--inject-slowdown must be >= 1, got {args.inject_slowdown:g}: the slowdown is "
            "planted as real extra work per call, which cannot make a call faster"
        )
    mode = (
        "update-counts" if args.update_counts else "against" if args.against or args.aa else "rules"
    )
    command.check(gates, mode)
    if args.update_counts:
        path = command.update_counts(gates, args.timeout)
        print(f"counts: {path}", file=sys.stderr)
        return 0
    if args.aa:
        calibration = command.calibrate(gates, args.aa, args.inject_slowdown, args.timeout)
        pairs = worker_pairs(gates.baselines, gates.settings.worker_pairs)
        text, verdicts = render.calibration_markdown(calibration, pairs), []
        if args.json:
            write_text_atomic(args.json, json.dumps(stored(calibration, gates), indent=1))
    elif args.against:
        verdicts = command.against(gates, args.against, args.timeout)
        text = render.markdown(verdicts, f"scanbench gate against {args.against}")
    else:
        records = load_run(args.results).records if args.results else None
        verdicts = command.rules_and_invariants(gates, records, args.timeout)
        text = render.markdown(verdicts)
    print(text)
    if args.md:
        write_text_atomic(args.md, text)
    if args.github:
        for line in github.publish(text, verdicts):
            print(line)
    return 1 if decide.failing(verdicts, args.strict) else 0


def stored(calibration, gates) -> dict:
    """What ``--json`` stores: the calibration, the gate's settings, and the machine."""
    environment = collect(measure_bandwidth=False)
    keep = ("timestamp", "python", "versions", "cpu_model", "cpu_count", "git_commit")
    return {
        "machine": {key: environment.get(key) for key in keep},
        "settings": dataclasses.asdict(gates.settings),
        "rules": [dataclasses.asdict(rule) for rule in gates.baselines],
        "calibration": calibration.to_json(),
    }

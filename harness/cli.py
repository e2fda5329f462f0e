"""``scanbench list | run | profile | report | gate | compare``: parse, call, write.

Each command parses its arguments, calls the harness (`harness.runner`, `harness.gate`,
...) and writes what it returns (results, reports, text); nothing is assembled or
formatted here. Every error of scanbench's own (unknown names, bad values, unreadable
results files) is printed as one line on stderr with exit code 2, never as a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.api import DTYPES, Counts, HarnessError, InputError
from harness.sources import file_source
from harness.store import Run, load_run, write_text_atomic
from harness.timing import TimingConfig

SEED_LIMIT = 2**32  # jax.random.key and NumPy's generators both accept 0 .. 2**32 - 1


def _number(kind: type, name: str, low: float, high: float = math.inf, low_open: bool = True):
    """An argparse type: a finite ``kind`` in (low, high) (or [low, high) if not
    ``low_open``), with a message naming the option and the range."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{name} must be {'an integer' if kind is int else 'a number'}, got {text!r}"
            ) from None
        below = value <= low if low_open else value < low
        if not math.isfinite(value) or below or value >= high:
            bound = f"> {low:g}" if low_open else f">= {low:g}"
            if high != math.inf:
                bound += f" and < {int(high)}" if kind is int else f" and < {high:g}"
            finite = "" if kind is int else "finite and "
            raise argparse.ArgumentTypeError(f"{name} must be {finite}{bound}, got {text}")
        return value

    return parse


def _positive(kind: type, name: str):
    return _number(kind, name, 0)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (with where to look), exit code 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _cell_options(default_size: str, sizes_help: str) -> argparse.ArgumentParser:
    """The options that name cells, shared by run, profile and compare."""
    cells = argparse.ArgumentParser(add_help=False)
    cells.add_argument(
        "--scenario",
        action="append",
        default=[],
        help="a scenario name or source (MODULE:ATTR, PATH.py:ATTR); repeatable",
    )
    cells.add_argument("--scenario-file", help="a Python file defining SCENARIO (your workload)")
    cells.add_argument("--backend", action="append", default=[], help="repeatable")
    cells.add_argument("--size", default=default_size, help=sizes_help)
    cells.add_argument("--dtype", help=f"one of {', '.join(DTYPES)}; default per scenario")
    cells.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=V1,V2",
        help="run each backend that declares parameter NAME once per value (e.g. "
        "block=500,1000,2000); repeatable; `scanbench list` shows the parameters",
    )
    cells.add_argument(
        "--seed",
        type=_number(int, "--seed", 0, SEED_LIMIT, low_open=False),
        default=0,
        help="input seed, 0 .. 2**32 - 1 (default 0)",
    )
    return cells


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="scanbench",
        description="Run JAX workloads through interchangeable evaluator backends and "
        "report time, throughput and where the time goes.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    listing = commands.add_parser("list", help="scenarios, their backends and sizes")
    listing.add_argument("--scenario-file", help="also list the SCENARIO in this file")

    run = commands.add_parser(
        "run",
        help="run cells and store a results JSON file",
        parents=[
            _cell_options(
                "default",
                "size name, or several separated by commas, e.g. smoke,default (default: default)",
            )
        ],
    )
    run.add_argument(
        "--max-time",
        type=_positive(float, "--max-time"),
        default=3.0,
        help="time budget of a cell's timed samples, seconds (default 3): sampling stops "
        "when it is spent, or earlier once the median is known to --target-width",
    )
    run.add_argument(
        "--target-width",
        type=_number(float, "--target-width", 0, low_open=False),
        default=0.02,
        help="stop sampling once the 95%% interval of the median is this narrow, relative "
        "to the median (default 0.02 = 2%%)",
    )
    run.add_argument(
        "--min-time",
        type=_number(float, "--min-time", 0, low_open=False),
        default=0.1,
        help="minimum total timed seconds per cell (default 0.1)",
    )
    run.add_argument(
        "--min-count",
        type=_positive(int, "--min-count"),
        default=3,
        help="minimum timed calls per cell, unless one call exceeds --max-time (default 3)",
    )
    run.add_argument(
        "--warmup",
        type=_number(int, "--warmup", 0, low_open=False),
        default=1,
        help="untimed warm-up calls (default 1)",
    )
    run.add_argument(
        "--timeout",
        type=_positive(float, "--timeout"),
        default=1800.0,
        help="seconds before a cell's worker is killed (default 1800)",
    )
    run.add_argument("--out", help="results JSON path (default results/run-<time>.json)")
    run.add_argument(
        "--force",
        action="store_true",
        help="overwrite an existing --out; with --resume: resume even if the code or "
        "environment changed",
    )
    run.add_argument(
        "--resume",
        metavar="PATH",
        help="continue an interrupted run: only its missing cells, with its stored settings",
    )
    run.add_argument(
        "--devices",
        help="device counts to run each cell with, e.g. 1,2,4,8 (CPU: virtual devices via "
        "XLA_FLAGS; sharded backends split their work over them; default: as visible)",
    )
    run.add_argument("--coordinator", help="multi-process run: HOST:PORT of process 0")
    run.add_argument("--num-processes", type=_positive(int, "--num-processes"))
    run.add_argument("--process-id", type=int)
    run.add_argument("--md", help="also write the markdown report to this path")
    run.add_argument("--html", help="also write the HTML report (with plots) to this path")
    run.add_argument("--quiet", action="store_true", help="do not print the markdown table")
    run.add_argument(
        "--no-probes",
        action="store_true",
        help="skip the counting passes (dispatches, kernels, transfers) and overheads",
    )
    run.add_argument(
        "--no-overlap",
        action="store_true",
        help="one cell at a time. By default, on a CPU with two or more cores, two cells' "
        "workers run at once: one imports and compiles while the other does too or is "
        "timed, and every timed or counted stage runs with the other worker stopped "
        "(SIGSTOP); compile times are then taken beside the other worker's",
    )
    run.add_argument(
        "--count-parts",
        action="store_true",
        help="store each count's fixed and per-unit parts (counted at 2, 3 and 4 units of "
        "the scenario's count_along, e.g. MPPI generations) also at sizes with 4 or fewer "
        "units; costs compiles at two more sizes per cell",
    )

    profile = commands.add_parser(
        "profile",
        help="write a Perfetto/XProf trace of one cell and summarise its counts",
        parents=[_cell_options("smoke", "size name (default: smoke)")],
    )
    profile.add_argument("--out", help="trace directory (default results/profile-<cell>)")
    profile.add_argument("--top", type=int, default=10, help="kernels to list (default 10)")
    profile.add_argument("--timeout", type=_positive(float, "--timeout"), default=1800.0)

    report = commands.add_parser("report", help="render stored results (never re-runs)")
    report.add_argument("results", nargs="+", help="results JSON files")
    report.add_argument("--md", help="write markdown here (default: print it)")
    report.add_argument("--html", help="also write the self-contained HTML report (with plots)")
    report.add_argument(
        "--mixed-versions",
        action="store_true",
        help="compare runs on the same device even when their jax versions differ",
    )
    gate = commands.add_parser(
        "gate", help="regression gate: exact counts, same-run invariants, --against REV"
    )
    gate.add_argument("--gates", default="benchmarks/gates.toml", help="the gate file (TOML)")
    gate.add_argument("--results", help="check this stored run instead of measuring now")
    gate.add_argument(
        "--update-counts", action="store_true", help="measure and rewrite the counts file"
    )
    gate.add_argument("--against", metavar="REV", help="compare [[baseline]] rules with REV")
    gate.add_argument(
        "--aa",
        type=_positive(int, "--aa"),
        metavar="N",
        help="self-calibration: this checkout on both sides, N repetitions",
    )
    gate.add_argument(
        "--inject-slowdown",
        type=_positive(float, "--inject-slowdown"),
        default=1.0,
        metavar="F",
        help="(with --aa; for testing the gate) slow the candidate side by factor F",
    )
    gate.add_argument("--strict", action="store_true", help="inconclusive invariants fail too")
    gate.add_argument("--md", help="also write the markdown section here")
    gate.add_argument("--timeout", type=_positive(float, "--timeout"), default=900.0)
    compare = commands.add_parser(
        "compare",
        help="same cells, same code, two environments (another jax, other XLA_FLAGS)",
        description="Time the selected cells in two environments A and B, interleaved in "
        "randomized blocks (the gate's method), and compare their counts. Exit 1 when a cell "
        "is significantly slower on B.",
        parents=[_cell_options("smoke", "one size name (default: smoke)")],
    )
    for side in ("a", "b"):
        name = side.upper()
        compare.add_argument(
            f"--{side}-python", metavar="PATH", help=f"side {name}'s interpreter (a venv's)"
        )
        compare.add_argument(
            f"--{side}-requirements",
            action="append",
            default=[],
            metavar="REQ",
            help=f"side {name}: install these (e.g. 'jax==0.10.0') with this project into "
            "a cached venv; repeatable",
        )
        compare.add_argument(
            f"--{side}-env",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help=f"side {name}: an environment variable (e.g. XLA_FLAGS=...); repeatable",
        )
    compare.add_argument(
        "--gates",
        default="benchmarks/gates.toml",
        help="the gate file whose [settings] (blocks, confidence, delta, ...) are used",
    )
    compare.add_argument("--blocks", type=_positive(int, "--blocks"), help="override")
    compare.add_argument("--md", help="also write the markdown here")
    compare.add_argument("--html", help="also write an HTML page here")
    compare.add_argument("--timeout", type=_positive(float, "--timeout"), default=900.0)
    return parser


def _params(args: argparse.Namespace) -> dict[str, list[str]]:
    """``--param NAME=V1,V2`` options as ``{NAME: [V1, V2]}`` (values parsed by the
    backends that declare NAME)."""
    params: dict[str, list[str]] = {}
    for item in args.param:
        name, equals, values = item.partition("=")
        if not equals or not name.isidentifier() or name in params:
            raise InputError(
                f"--param {item!r}: expected NAME=V1,V2,... with each NAME given once, "
                "e.g. --param block=500,1000"
            )
        params[name] = _comma_list(values, f"--param {name}", str, "values")
    return params


def _scenarios(args: argparse.Namespace) -> list[str]:
    """The scenarios named: catalogue names or sources, and ``--scenario-file``'s."""
    return [*args.scenario, *([file_source(args.scenario_file)] if args.scenario_file else [])]


def _comma_list(text: str, option: str, parse: type, what: str) -> list:
    """``a,b,c`` -> parsed values, each given once and valid (non-empty / >= 1)."""
    try:
        values = [parse(part.strip()) for part in text.split(",")]
    except ValueError:
        values = []
    valid = all(value >= 1 if parse is int else value for value in values)
    if not values or not valid or len(set(values)) != len(values):
        raise InputError(f"{option} must be {what} separated by commas, each once; got {text!r}")
    return values


def _write_reports(runs: Sequence[Run], apart: Sequence, md: str | None, html: str | None, **kw):
    """Build the report once; write its markdown (returned) and HTML where asked."""
    from reports import html as html_report
    from reports import markdown as markdown_report
    from reports.model import build

    report = build(runs, apart, **kw)
    markdown = markdown_report.render(report)
    if md:
        write_text_atomic(md, markdown)
        print(f"report: {md}", file=sys.stderr)
    if html:
        write_text_atomic(html, html_report.render(report))
        print(f"report: {html}", file=sys.stderr)
    return markdown


def _list(args: argparse.Namespace) -> int:
    from harness.sources import catalogue, load
    from reports.listing import render

    scenarios = [load(source) for source in catalogue().values()]
    if args.scenario_file:
        scenarios.append(load(file_source(args.scenario_file)))
    print(render(scenarios))
    return 0


def _run(args: argparse.Namespace) -> int:
    from harness import runner
    from harness.sharding.distributed import distributed_settings

    if args.resume:
        return _finish(runner.resume(Path(args.resume), args.force), Path(args.resume), args)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(args.out or f"results/run-{stamp}.json")
    sizes = _comma_list(args.size, "--size", str, "size names (e.g. smoke,default)")
    devices = (
        [None]
        if args.devices is None
        else _comma_list(args.devices, "--devices", int, "device counts >= 1 (e.g. 1,2,4,8)")
    )
    os.environ.update(distributed_settings(args.coordinator, args.num_processes, args.process_id))
    timing = TimingConfig(
        warmup=args.warmup,
        min_time_s=args.min_time,
        min_count=args.min_count,
        max_time_s=args.max_time,
        target_width=args.target_width,
    )
    plan, invocation = runner.plan(
        _scenarios(args),
        args.backend,
        sizes,
        args.dtype,
        args.seed,
        devices,
        timing,
        args.timeout,
        probes=not args.no_probes,
        count_parts=args.count_parts,
        params=_params(args),
        overlap=not args.no_overlap,
    )
    run = runner.run(plan, invocation, out, [args.md, args.html], args.force)
    return _finish(run, out, args)


def _finish(run: Run, out: Path, args: argparse.Namespace) -> int:
    stored = load_run(out) if out.exists() else run  # reports read what was stored
    markdown = _write_reports([stored], [], args.md, args.html)
    if not args.quiet:
        print(markdown)
    failed = [r for r in stored.records if r.status == "failed"]
    print(f"results: {out} ({len(stored.records)} cells, {len(failed)} failed)", file=sys.stderr)
    return 1 if failed else 0


def _profile(args: argparse.Namespace) -> int:
    from harness.launcher import profile_in_worker
    from harness.selection import select
    from reports.profile import render

    if not _scenarios(args):
        raise InputError("profile needs --scenario NAME (or a source) or --scenario-file PATH")
    if len(args.backend) != 1:
        raise InputError("profile traces one cell: give exactly one --backend")
    cells = select(_scenarios(args), args.backend, args.size, args.dtype, args.seed, _params(args))
    if len(cells) != 1:
        raise InputError(f"profile traces one cell; these select {len(cells)}")
    (cell,) = cells
    out = Path(args.out or f"results/profile-{cell.scenario}-{cell.backend}-{cell.size}")
    out.mkdir(parents=True, exist_ok=True)
    counts = Counts.from_json(profile_in_worker(cell, str(out.resolve()), args.timeout))
    if "trace" in counts.errors:
        raise HarnessError(f"the trace of {cell.label} failed: {counts.errors['trace']}")
    print(render(counts, cell.label, str(out), args.top))
    return 0


def _report(args: argparse.Namespace) -> int:
    from reports.comparable import load_runs

    outputs = [os.path.realpath(p) for p in (args.md, args.html) if p]
    inputs = {os.path.realpath(p) for p in args.results}
    if len(set(outputs)) != len(outputs) or inputs & set(outputs):
        raise InputError(
            "--md and --html must be different files, and neither one of the results files"
        )
    runs, apart = load_runs(args.results)
    markdown = _write_reports(runs, apart, args.md, args.html, mixed_versions=args.mixed_versions)
    if not args.md:
        print(markdown)
    return 0


def _gate(args: argparse.Namespace) -> int:
    from harness.gate import command
    from harness.gate.decide import failing
    from harness.gate.render import calibration_markdown, markdown
    from harness.gate.rules import load_gates

    gates = load_gates(args.gates)
    if args.inject_slowdown != 1.0 and not args.aa:
        raise InputError("--inject-slowdown only works with --aa (it is a test of the gate)")
    if args.update_counts:
        path = command.update_counts(gates, args.timeout)
        print(f"counts: {path}", file=sys.stderr)
        return 0
    if args.aa:
        calibration = command.calibrate(gates, args.aa, args.inject_slowdown, args.timeout)
        text, verdicts = calibration_markdown(calibration), []
    elif args.against:
        verdicts = command.against(gates, args.against, args.timeout)
        text = markdown(verdicts, f"scanbench gate against {args.against}")
    else:
        records = load_run(args.results).records if args.results else None
        verdicts = command.rules_and_invariants(gates, records, args.timeout)
        text = markdown(verdicts)
    print(text)
    if args.md:
        write_text_atomic(args.md, text)
    return 1 if failing(verdicts, args.strict) else 0


def _compare(args: argparse.Namespace) -> int:
    from harness.gate.compare import Change, SideSpec, compare_environments
    from harness.gate.environments import parse_assignments
    from harness.gate.render import comparison_html, comparison_markdown
    from harness.gate.rules import load_gates
    from harness.selection import select

    cells = select(_scenarios(args), args.backend, args.size, args.dtype, args.seed, _params(args))
    settings = load_gates(args.gates).settings
    if args.blocks:
        settings = dataclasses.replace(settings, blocks=args.blocks)
    a, b = (
        SideSpec(
            side.upper(),
            getattr(args, f"{side}_python"),
            tuple(getattr(args, f"{side}_requirements")),
            parse_assignments(getattr(args, f"{side}_env"), f"--{side}-env"),
        )
        for side in ("a", "b")
    )
    comparisons, sides = compare_environments(cells, a, b, settings, args.timeout)
    text = comparison_markdown(comparisons, sides, settings.confidence, settings.delta)
    print(text)
    if args.md:
        write_text_atomic(args.md, text)
    if args.html:
        page = comparison_html(comparisons, sides, settings.confidence, settings.delta)
        write_text_atomic(args.html, page)
    return 1 if any(c.verdict == Change.SLOWER for c in comparisons) else 0


COMMANDS = {
    "list": _list,
    "run": _run,
    "profile": _profile,
    "report": _report,
    "gate": _gate,
    "compare": _compare,
}


def main(argv: Sequence[str] | None = None) -> int:
    from harness.interrupts import Interrupted

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help (0) or a usage error (2), already printed
        return int(stop.code or 0)
    try:
        return COMMANDS[args.command](args)
    except Interrupted as stop:  # what was finished is saved; the message says where
        print(str(stop), file=sys.stderr)
        return stop.exit_code
    except HarnessError as error:
        print(f"scanbench: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

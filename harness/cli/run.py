"""``scanbench run``: measure cells in fresh workers and store a results file (with its
markdown and HTML reports); ``--resume`` continues an interrupted run."""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from pathlib import Path

from ..api import InputError
from ..cells import Selection
from ..execution.interrupts import Interrupted, signals_raise
from ..extras import check_html
from ..growth.points import parse_grow
from ..invocation import REMEASURE
from ..results import Run, load_run
from ..sampling import TimingConfig
from ..sharding.distributed import distributed_settings
from . import run_shards
from .options import cell_options, comma_list, number, params, positive, scenarios

HELP = "run cells and store a results JSON file"


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    sizes = (
        "size name, or several separated by commas (or --size repeated), e.g. "
        "smoke,default (default: default)"
    )
    parser = commands.add_parser(
        "run", help=HELP, description=HELP, parents=[cell_options("default", sizes, True)]
    )
    _timing_options(parser)
    parser.add_argument("--out", help="results JSON path (default results/run-<time>.json)")
    parser.add_argument(
        "--force",
        action="store_true",
        help="overwrite an existing --out; with --resume: resume even if the code or "
        "environment changed",
    )
    parser.add_argument(
        "--resume",
        metavar="PATH",
        help="continue an interrupted run: only its missing cells, with its stored settings",
    )
    parser.add_argument(
        "--devices",
        help="device counts to run each cell with, e.g. 1,2,4,8 (CPU: virtual devices via "
        "XLA_FLAGS; sharded backends split their work over them; default: as visible)",
    )
    parser.add_argument("--coordinator", help="multi-process run: HOST:PORT of process 0")
    parser.add_argument("--num-processes", type=positive(int, "--num-processes"))
    parser.add_argument("--process-id", type=int)
    parser.add_argument("--md", help="also write the markdown report to this path")
    parser.add_argument("--html", help="also write the HTML report (with plots) to this path")
    parser.add_argument("--quiet", action="store_true", help="do not print the markdown table")
    parser.add_argument(
        "--no-probes",
        action="store_true",
        help="skip the counting passes (dispatches, kernels, transfers) and overheads",
    )
    parser.add_argument(
        "--no-overlap",
        action="store_true",
        help="one cell at a time. By default, on a CPU with two or more cores, two cells' "
        "workers run at once: one imports and compiles while the other does too or is "
        "timed, and every timed or counted stage runs with the other worker stopped "
        "(SIGSTOP); compile times are then taken beside the other worker's",
    )
    parser.add_argument(
        "--cache",
        choices=("warm", "cold", "both"),
        default="warm",
        help="warm (default): every sample finds the caches as the previous call left them; "
        "cold: the caches are evicted before every sample (outside the timed region); "
        "both: each cell twice, warm and cold, never mixed in one statistic",
    )
    parser.add_argument(
        "--count-parts",
        action="store_true",
        help="store each count's fixed and per-unit parts (counted at 2, 3 and 4 units of "
        "the scenario's count_along, e.g. MPPI generations) also at sizes with 4 or fewer "
        "units; costs compiles at two more sizes per cell",
    )
    _growth_options(parser)
    run_shards.add_options(parser)
    parser.set_defaults(stored_defaults={dest: parser.get_default(dest) for dest in STORED})
    return parser


# what a run stores and `--resume` takes from it: given again, they would be ignored
STORED = (
    "scenario",
    "scenario_file",
    "backend",
    "size",
    "dtype",
    "param",
    "seed",
    "max_time",
    "target_width",
    "min_time",
    "min_count",
    "min_samples",
    "warmup",
    "remeasure",
    "out",
    "devices",
    "no_probes",
    "no_overlap",
    "cache",
    "count_parts",
    "grow",
    "grow_budget",
)


def _given_with_resume(args: argparse.Namespace) -> list[str]:
    """The stored settings given beside ``--resume`` (as options: ``--max-time``)."""
    defaults = getattr(args, "stored_defaults", {})
    return [
        "--" + dest.replace("_", "-")
        for dest, default in defaults.items()
        if getattr(args, dest, default) != default
    ]


def _growth_options(parser: argparse.ArgumentParser) -> None:
    """How the cost grows with the work (`scanbench.growth`)."""
    parser.add_argument(
        "--grow",
        action="append",
        default=[],
        metavar="AXIS=START..STOP[:POINTS|:xF]",
        help="measure every selected backend along one of the scenario's axes (e.g. "
        "tridiagonal: batch, n; mppi_tuning: population, samples, horizon, generations), "
        "from the --size (the base) with AXIS from START to STOP in "
        "geometric steps: a count (:8) or a factor (:x2, the default); fits each backend's "
        "time as fixed + per unit x units^k, names where two backends cross and measures "
        "there to confirm it; repeatable (one sweep per axis)",
    )
    parser.add_argument(
        "--grow-budget",
        type=positive(float, "--grow-budget"),
        metavar="S",
        help="with --grow: skip (and list) the points where one call of a backend is "
        "predicted, from its points before, to take more than S seconds (default 1)",
    )


def _timing_options(parser: argparse.ArgumentParser) -> None:
    """How each cell is sampled (`scanbench.sampling.TimingConfig`) and how long it may take."""
    parser.add_argument(
        "--max-time",
        type=positive(float, "--max-time"),
        default=3.0,
        help="time budget of a cell's timed samples, seconds (default 3): sampling stops "
        "when it is spent, or earlier once the median is known to --target-width",
    )
    parser.add_argument(
        "--target-width",
        type=number(float, "--target-width", 0, low_open=False),
        default=0.02,
        help="stop sampling once the 95%% interval of the median is this narrow, relative "
        "to the median (default 0.02 = 2%%)",
    )
    parser.add_argument(
        "--min-time",
        type=number(float, "--min-time", 0, low_open=False),
        default=0.1,
        help="minimum total timed seconds per cell (default 0.1)",
    )
    parser.add_argument(
        "--min-count",
        type=positive(int, "--min-count"),
        default=3,
        help="minimum timed calls per cell, unless one call exceeds --max-time (default 3)",
    )
    parser.add_argument(
        "--min-samples",
        type=positive(int, "--min-samples"),
        default=1,
        help="at least this many timed calls whatever the budget (default 1: a call over "
        "--max-time is timed once, with no interval)",
    )
    parser.add_argument(
        "--warmup",
        type=number(int, "--warmup", 0, low_open=False),
        default=1,
        help="untimed warm-up calls (default 1)",
    )
    parser.add_argument(
        "--remeasure",
        type=number(int, "--remeasure", 0, low_open=False),
        default=REMEASURE,
        metavar="N",
        help="sample a disturbed cell (a busy machine or a slow spell in its samples) "
        "again, at most N times in all: once in its worker, then in fresh workers after "
        "the run's other cells; the first undisturbed measurement is kept, else the "
        f"quietest (default {REMEASURE}; 0: never)",
    )
    parser.add_argument(
        "--timeout",
        type=positive(float, "--timeout"),
        default=1800.0,
        help="seconds before a cell's worker is killed (default 1800)",
    )


def run(args: argparse.Namespace) -> int:
    from ..execution import runner

    run_shards.check(args)
    check_html(args.html)
    given = _given_with_resume(args) if args.resume else []
    if given:
        raise InputError(
            f"--resume continues a run with its stored settings: {', '.join(given)} cannot be "
            "given with it (start a new run with --out to change them)"
        )
    if args.resume and run_shards.submitted(Path(args.resume)):
        return run_shards.pick_up(args, Path(args.resume), finish)
    if args.resume:
        return finish(runner.resume(Path(args.resume), args.force), Path(args.resume), args)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(args.out or f"results/run-{stamp}.json")
    devices = (
        [None]
        if args.devices is None
        else comma_list(args.devices, "--devices", int, "device counts >= 1 (e.g. 1,2,4,8)")
    )
    os.environ.update(distributed_settings(args.coordinator, args.num_processes, args.process_id))
    selection = Selection(
        scenarios=tuple(scenarios(args)),
        backends=tuple(args.backend),
        sizes=tuple(comma_list(args.size, "--size", str, "size names (e.g. smoke,default)")),
        dtype=args.dtype,
        seed=args.seed,
        devices=tuple(devices),
        params=params(args),
        caches=("warm", "cold") if args.cache == "both" else (args.cache,),
    )
    timing = TimingConfig(
        warmup=args.warmup,
        min_time_s=args.min_time,
        min_count=args.min_count,
        min_samples=args.min_samples,
        max_time_s=args.max_time,
        target_width=args.target_width,
    )
    invocation = runner.plan(
        selection,
        timing,
        timeout_s=args.timeout,
        probes=not args.no_probes,
        count_parts=args.count_parts,
        overlap=not args.no_overlap,
        remeasure=args.remeasure,
        grow=[parse_grow(text) for text in args.grow],
        grow_budget_s=args.grow_budget,
        argv=sys.argv[1:],
    )
    if args.executor:
        return run_shards.submit(args, invocation, out, finish)
    if args.shard:
        invocation = run_shards.shard(args, invocation)
    measured = runner.run(invocation, out, [args.md, args.html], args.force)
    return finish(measured, out, args)


class ReportsStopped(Interrupted):
    """SIGINT or SIGTERM while a finished run's reports were written or printed: every
    cell is saved already, and the reports can be written again from the results."""

    def __init__(self, signum: int, out: Path) -> None:
        super().__init__(signum)
        saved = f": every cell is saved in {out}; `scanbench report {out}` writes them again"
        self.args = ("interrupted while writing the reports" + (saved if out.exists() else ""),)


def finish(measured: Run, out: Path, args: argparse.Namespace) -> int:
    """Write the reports of what was stored, print the markdown and where the results
    are; exit 1 when a cell failed. A Ctrl-C meanwhile is one line saying that the
    results are whole (`ReportsStopped`), not a traceback."""
    from scanbench.reports.written import write_reports

    try:
        with signals_raise():
            stored = load_run(out) if out.exists() else measured  # reports read the file
            markdown = write_reports([stored], (), args.md, args.html)
            for path in (args.md, args.html):
                if path:
                    print(f"report: {path}", file=sys.stderr)
            if not args.quiet:
                print(markdown)
    except Interrupted as stop:
        raise ReportsStopped(stop.signum, out) from None
    failed = [r for r in stored.records if r.status == "failed"]
    print(f"results: {out} ({len(stored.records)} cells, {len(failed)} failed)", file=sys.stderr)
    return 1 if failed else 0

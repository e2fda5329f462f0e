"""The options of ``scanbench run`` that spread a run over machines, and their handling:
``--shard K/N`` (this machine measures one shard: `scanbench.execution.shards`) and
``--executor local|slurm --shards N`` (submit every shard as a job, wait, gather:
`scanbench.execution.executors`, `scanbench.execution.gathering`)."""

from __future__ import annotations

import argparse
import datetime
import os
import secrets
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..api import InputError
from .options import number, positive

# `scanbench.cli.run.finish`: the reports of the gathered run, written as `run` writes them
Finish = Callable[[Any, Path, argparse.Namespace], int]


def add_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "several machines",
        "split the run's cells into shards, one per machine (the manual's 'Several devices "
        "and machines' page)",
    )
    group.add_argument(
        "--shard",
        metavar="K/N",
        help="measure only shard K of N of the run (e.g. one CI matrix job each); every "
        "machine computes the same split; `scanbench gather` merges the shard files",
    )
    group.add_argument(
        "--run-id",
        help="the id the shards of one run share (default: from the cell list, N and the "
        "costs; give a CI run's id to tell repeated runs apart)",
    )
    group.add_argument(
        "--shard-by",
        choices=("table", "cell"),
        default="table",
        help="table (default): the cells a report compares stay in one shard; cell: "
        "finer and better balanced, ratios across shards left out",
    )
    group.add_argument(
        "--shard-costs",
        metavar="PATH",
        help="balance the shards on the seconds each cell took before: a results file or "
        "a history directory (default: a model of each cell's size and budget)",
    )
    group.add_argument(
        "--executor",
        choices=("local", "slurm"),
        help="submit every shard as a job through submitit and gather them into --out: "
        "slurm (one array task per shard, each on a node of its own) or local (this "
        "machine, one shard at a time); `--resume OUT` picks the jobs up by their ids",
    )
    group.add_argument(
        "--shards",
        type=positive(int, "--shards"),
        metavar="N",
        help="with --executor: the number of shards (array tasks)",
    )
    group.add_argument("--partition", help="with --executor slurm: the SLURM partition")
    group.add_argument(
        "--time-limit",
        type=positive(int, "--time-limit"),
        metavar="MINUTES",
        help="with --executor: minutes before a shard's job is ended (default: 3 x the "
        "longest shard's expected time + 30)",
    )
    group.add_argument(
        "--gpus-per-node",
        type=number(int, "--gpus-per-node", 0, low_open=False),
        metavar="N",
        help="with --executor slurm: GPUs of each shard's node",
    )
    group.add_argument(
        "--slurm-config",
        metavar="TOML",
        help="a TOML file whose [slurm] table sets partition, time_limit, gpus_per_node, "
        "account, qos, constraint, cpus_per_task, mem_gb, setup, exclusive, "
        "array_parallelism (the options above override it)",
    )


SLURM_OPTIONS = ("partition", "time_limit", "gpus_per_node", "slurm_config")


def check(args: argparse.Namespace) -> None:
    """Options that do not go together, refused before anything runs."""
    given = [f"--{name.replace('_', '-')}" for name in SLURM_OPTIONS if getattr(args, name)]
    given += ["--shards"] if args.shards is not None else []
    if args.shard and args.executor:
        raise InputError(
            "--shard K/N measures one shard here; --executor submits every shard: give one"
        )
    if args.executor:
        from ..execution.executors import check_submitit  # start-up cost: only with it

        check_submitit()
    if args.executor and args.shards is None:
        raise InputError(f"--executor {args.executor} needs --shards N (the number of jobs)")
    if given and not args.executor:
        raise InputError(f"{given[0]} applies to --executor local|slurm")
    spread = args.shard or args.executor
    if args.resume and (spread or given):
        raise InputError(
            "--resume continues a run (a shard, or submitted jobs) with its stored settings; "
            "drop --shard/--executor and their options"
        )
    for name in ("run_id", "shard_costs"):
        if getattr(args, name) and not spread:
            raise InputError(f"--{name.replace('_', '-')} applies to --shard or --executor")
    if spread and (args.grow or args.grow_budget is not None):
        raise InputError("--grow runs on one machine; drop --shard/--executor")
    if spread and (args.coordinator or args.num_processes):
        raise InputError("--coordinator runs one cell over hosts; drop --shard/--executor")


def _split(args: argparse.Namespace, invocation, count: int, run_id: str | None):
    from ..execution import shards
    from ..history.costs import earlier_costs

    plan = invocation.plan
    earlier = None
    if args.shard_costs is not None:
        earlier = earlier_costs(args.shard_costs, plan.timing, plan.probes)
    return shards.split(plan.cells, count, plan.timing, plan.probes, args.shard_by, earlier, run_id)


def shard(args: argparse.Namespace, invocation):
    """``--shard K/N``: the invocation of this machine's part of the run."""
    from ..execution import shards

    spec = shards.parse_shard(args.shard)
    chosen = _split(args, invocation, spec.count, args.run_id)
    expected = ", ".join(f"{s:.0f}" for s in chosen.expected_s)
    print(
        f"shard {spec.label} of run {chosen.run_id}: {len(chosen.positions[spec.index - 1])} "
        f"of {len(chosen.cells)} cells (split by {chosen.unit}; expected s per shard: "
        f"{expected}, from {chosen.costs_from})",
        file=sys.stderr,
    )
    return shards.restrict(invocation, chosen, spec.index)


def _say(line: str) -> None:
    stamp = datetime.datetime.now().strftime("%H:%M:%S")
    print(f"[{stamp}] {line}", file=sys.stderr, flush=True)


def submit(args: argparse.Namespace, invocation, out: Path, finish: Finish) -> int:
    """``--executor``: split, submit one job per shard, wait, gather into ``out``."""
    from ..execution import executors, shards
    from ..execution.runner import check_outputs

    executors.check_available(args.executor)
    check_outputs(out, [args.md, args.html], args.force)
    if executors.jobs_path(out).exists() and not args.force:
        raise InputError(
            f"{executors.jobs_path(out)} exists: `scanbench run --resume {out}` picks its "
            "jobs up; --force submits anew"
        )
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    run_id = args.run_id or f"{stamp}-{secrets.token_hex(3)}"
    chosen = _split(args, invocation, args.shards, run_id)
    settings = executors.slurm_settings(
        args.slurm_config,
        partition=args.partition,
        time_limit=args.time_limit,
        gpus_per_node=args.gpus_per_node,
    )
    minutes = executors.time_limit(settings, chosen.expected_s)
    folder = executors.jobs_folder(out)  # 0700, this user's: the jobs load pickles from it
    jobs = executors.Jobs(
        executor=args.executor,
        folder=str(folder.resolve()),
        out=str(out.resolve()),
        reports=(args.md, args.html),
        run_id=chosen.run_id,
        cwd=os.getcwd(),
        minutes=minutes,
        parameters=executors.executor_parameters(settings, chosen.count, chosen.run_id, minutes),
        shards=tuple(
            executors.ShardJob(
                index,
                str(
                    (folder / f"shard-{shards.ShardSpec(index, chosen.count).slug}.json").resolve()
                ),
                shards.restrict(invocation, chosen, index).to_json(),
            )
            for index in range(1, chosen.count + 1)
        ),
    )
    executors.save_jobs(jobs)
    expected = ", ".join(f"{s:.0f}" for s in chosen.expected_s)
    _say(
        f"run {chosen.run_id}: {len(chosen.cells)} cells in {chosen.count} shards (split by "
        f"{chosen.unit}; expected s per shard: {expected}, from {chosen.costs_from}); "
        f"{args.executor} jobs, time limit {minutes} min, folder {folder}"
    )
    return _finish(jobs, executors.drive(jobs, _say), args, finish)


def shard_name(index: int, count: int) -> str:
    """A shard's file name: ``shard-2-of-3.json``."""
    from ..execution.shards import ShardSpec

    return f"shard-{ShardSpec(index, count).slug}.json"


def submitted(out: Path) -> bool:
    """Whether ``out`` is a run submitted with --executor (it has a jobs file)."""
    from ..execution.executors import jobs_path

    return jobs_path(out).exists()


def pick_up(args: argparse.Namespace, out: Path, finish: Finish) -> int:
    """``--resume OUT`` of a submitted run: its jobs picked up by their ids."""
    from ..execution import executors

    jobs = executors.read_jobs(out)
    _say(f"picking up run {jobs.run_id}: {len(jobs.shards)} {jobs.executor} shards")
    return _finish(jobs, executors.drive(jobs, _say, pick_up=True), args, finish)


def _finish(jobs, outcome, args: argparse.Namespace, finish: Finish) -> int:
    from ..execution.gathering import gather_into

    if outcome.failed:
        for index, job_id, tail in outcome.failed:
            print(
                f"shard {index}/{len(jobs.shards)} failed (job {job_id}): {tail}",
                file=sys.stderr,
            )
        print(
            f"not gathered: {len(outcome.failed)} shard(s) failed; their logs are in "
            f"{jobs.folder}; `scanbench run --resume {jobs.out}` resubmits them",
            file=sys.stderr,
        )
        return 1
    out = Path(jobs.out)
    for line in gather_into([shard.out for shard in jobs.shards], out, force=True):
        _say(line)
    md, html = jobs.reports
    return finish(None, out, argparse.Namespace(md=md, html=html, quiet=args.quiet))

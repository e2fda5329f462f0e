"""How long scanbench's own main jobs take on this machine, and where that time goes: the
benchmark of the harness itself (``nox -s perf``), so that a regression in its speed shows.

Each part runs as a user or CI runs it, timed from outside, with the load average before
and after (a busy machine says so beside its figure):

- ``smoke``: ``scanbench run --size smoke`` of every bundled scenario, its markdown and
  HTML reports included (what ``nox -s bench -- --size smoke`` runs);
- ``bench``: the same at ``--size smoke,default`` (``nox -s bench``);
- ``tests``: the test suite as ``nox -s tests`` runs it (``pytest -n 2 -m "not solo"``,
  then the ``solo`` tests with ``--reruns 2``), with its slowest tests and the id of
  every test that failed (the figure names them);
- ``gate``: ``scanbench gate`` on this repository's gate file (``nox -s gate``).

A run's wall time is split by the lines it prints as it goes (each line timestamped as
it arrives): *start-up and environment* (to the first cell's line), *cells* (to the last
cell's result) and *reports* (to the exit); its cells' own stages, summed over the run,
come from its results file (the report's "Where the run's time went"). ``.ci/run`` is
the tests, the gate, and the lint and manual builds, whose costs are not the harness's.

``python docs/harness_speed.py --out results/perf.json [--parts smoke,tests]`` (under
the heavy lock: it times things); ``--out docs/results/harness-speed/perf.json`` for the
performance log's figure (``docs/figures.py``, ``harness-speed``).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from scanbench.environment import cpu_model, git_commit
from scanbench.results import load_run
from scanbench.safe_files import write_json_atomic

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("smoke", "bench", "tests", "gate")
CELL_LINE = re.compile(r"^\[(?P<index>\d+)/(?P<total>\d+)\] (?P<label>\S+): (?P<what>.*)$")
DURATION = re.compile(r"^(?P<seconds>[\d.]+)s (?P<when>call|setup|teardown)\s+(?P<test>\S+)")
KEPT = ("returncode", "wall_s", "load_before", "load_after")  # of a timed command
COUNTS = re.compile(
    r"(?P<count>\d+) (?P<what>passed|failed|skipped|deselected|xfailed|xpassed|rerun|errors?)"
)
FAILURE = re.compile(r"^(?P<what>FAILED|ERROR) (?P<test>\S+)")  # pytest's -rfE summary


def _load() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def timed(command: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``command``; its wall time, exit code, load before and after, and its
    stdout and stderr lines each with the seconds since the start when it arrived."""
    lines: list[tuple[float, str, str]] = []
    load_before = _load()
    start = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )

    def read(stream, name: str) -> None:
        for line in stream:
            lines.append((time.perf_counter() - start, name, line.rstrip("\n")))

    readers = [
        threading.Thread(target=read, args=(process.stdout, "out"), daemon=True),
        threading.Thread(target=read, args=(process.stderr, "err"), daemon=True),
    ]
    for reader in readers:
        reader.start()
    code = process.wait()
    wall = time.perf_counter() - start
    for reader in readers:
        reader.join()
    return {
        "command": command,
        "returncode": code,
        "wall_s": wall,
        "load_before": load_before,
        "load_after": _load(),
        "lines": sorted(lines),
    }


def run_split(result: dict[str, Any]) -> dict[str, float]:
    """A ``scanbench run``'s wall time in three: to its first cell's line, to its last
    cell's result line, to its exit."""
    cells = [(at, CELL_LINE.match(text)) for at, name, text in result["lines"] if name == "err"]
    cells = [(at, match) for at, match in cells if match]
    if not cells:
        return {"start-up and environment": result["wall_s"]}
    first = cells[0][0]
    last = max(at for at, match in cells if not match["what"].startswith("running"))
    return {
        "start-up and environment": first,
        "cells": last - first,
        "reports": result["wall_s"] - last,
    }


def stage_totals(results: Path) -> dict[str, Any]:
    """The cells of a results file: how many, failed, disturbed, and their stages summed
    (seconds, largest first)."""
    run = load_run(results)
    totals: dict[str, float] = {}
    for record in run.records:
        for stage, seconds in (record.extra.get("phases_s") or {}).items():
            totals[stage] = totals.get(stage, 0.0) + seconds
    return {
        "cells": len(run.records),
        "failed": sum(record.status == "failed" for record in run.records),
        "disturbed": sum(bool(record.disturbed) for record in run.records),
        "stages_s": dict(sorted(totals.items(), key=lambda item: -item[1])),
    }


def scanbench_run(sizes: str, folder: Path) -> dict[str, Any]:
    out = folder / f"run-{sizes.replace(',', '-')}.json"
    command = [sys.executable, "-m", "scanbench.cli.main", "run", "--size", sizes, "--force"]
    command += ["--out", str(out), "--md", str(out.with_suffix(".md"))]
    command += ["--html", str(out.with_suffix(".html"))]
    result = timed(command)
    part = {key: result[key] for key in KEPT}
    part["split_s"] = run_split(result)
    if out.exists():
        part.update(stage_totals(out))
    return part


def pytest_part(marker: str, extra: list[str]) -> dict[str, Any]:
    """One pytest run of the ``marker`` tests: its wall time, its slowest tests, its
    outcome counts and the id of every test that failed or errored (``-rfE``)."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", marker]
    result = timed([*command, *extra, "--durations=15", "-rfE"])
    part = {key: result[key] for key in KEPT}
    texts = [text for _, name, text in result["lines"] if name == "out"]
    slowest = []
    for text in texts:
        match = DURATION.match(text)
        if match:
            slowest.append([match["test"], match["when"], float(match["seconds"])])
    part["slowest"] = slowest
    part["failures"] = [
        [match["what"], match["test"]] for match in map(FAILURE.match, texts) if match
    ]
    summary = next((t for t in reversed(texts) if " in " in t and "passed" in t), "")
    part["outcome"] = {m["what"]: int(m["count"]) for m in COUNTS.finditer(summary)}
    return part


def measure(parts: list[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="scanbench-perf-") as tmp:
        for name in parts:
            print(f"harness speed: {name} ...", file=sys.stderr, flush=True)
            if name == "smoke":
                found[name] = scanbench_run("smoke", Path(tmp))
            elif name == "bench":
                found[name] = scanbench_run("smoke,default", Path(tmp))
            elif name == "tests":
                found[name] = {  # as `nox -s tests` runs them (noxfile.py)
                    "not solo": pytest_part("not solo", ["-n", "2"]),
                    "solo": pytest_part("solo", ["--reruns", "2"]),
                }
                found[name]["wall_s"] = sum(p["wall_s"] for p in found[name].values())
            elif name == "gate":
                command = [sys.executable, "-m", "scanbench.cli.main", "gate"]
                command += ["--gates", "bench/gates.toml", "--md", str(Path(tmp, "gate.md"))]
                result = timed(command)
                found[name] = {key: result[key] for key in KEPT}
            print(f"harness speed: {name} {found[name]['wall_s']:.1f} s", file=sys.stderr)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the JSON file to write")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"of {', '.join(PARTS)}")
    args = parser.parse_args(argv)
    parts = [part.strip() for part in args.parts.split(",") if part.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"--parts: unknown {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    measured = measure(parts)
    data = {**stamp(started), "parts": measured}
    write_json_atomic(args.out, data)
    print(render(data), file=sys.stderr)
    print(f"harness speed: {args.out}", file=sys.stderr)
    return 0


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{seconds:.1f} s"


def _outcome(part: dict[str, Any]) -> str:
    """``1034 passed, 2 failed: tests/a.py::t, ...``: what a failure is never hidden by."""
    counts = part["outcome"]
    shown = [f"{counts.get('passed', 0)} passed"]
    shown += [f"{counts[what]} {what}" for what in ("failed", "error", "errors") if what in counts]
    failed = [test for _, test in part.get("failures", ())]
    return ", ".join(shown) + (f": {', '.join(f'`{test}`' for test in failed)}" if failed else "")


def render(data: dict[str, Any]) -> str:
    """The figure of the performance log: each part's wall time, its split, the load."""
    rows = ["| job | wall | split | load before / after |", "| --- | --- | --- | --- |"]
    names = {
        "smoke": "`scanbench run --size smoke` (every scenario, reports)",
        "bench": "`scanbench run --size smoke,default` (`nox -s bench`)",
        "tests": "the tests (`nox -s tests`)",
        "gate": "`scanbench gate` (`nox -s gate`)",
    }
    for name, part in data["parts"].items():
        if name == "tests":
            pieces = [
                f"{label} {_duration(p['wall_s'])} ({_outcome(p)})"
                for label, p in part.items()
                if isinstance(p, dict)
            ]
            load = f"{part['not solo']['load_before']} / {part['solo']['load_after']}"
        else:
            split = part.get("split_s", {})
            pieces = [f"{label} {_duration(seconds)}" for label, seconds in split.items()]
            if "cells" in part:
                counted = f"{part['cells']} cells, {part['failed']} failed"
                pieces.append(counted + f", {part.get('disturbed', 0)} still disturbed")
            load = f"{part['load_before']} / {part['load_after']}"
        wall = _duration(part["wall_s"])
        rows.append(f"| {names[name]} | {wall} | {'; '.join(pieces)} | {load} |")
    stages = next((p for n, p in data["parts"].items() if n == "smoke" and "stages_s" in p), None)
    if stages:
        rows += ["", "| smoke run's stages (summed over cells) | total |", "| --- | --- |"]
        rows += [f"| {stage} | {_duration(s)} |" for stage, s in stages["stages_s"].items()]
    return "\n".join(rows) + "\n\n" + measured_by("docs/harness_speed.py", data)


def stamp(started: str) -> dict:
    """What a measuring script's JSON says of itself: when, which commit, which machine."""
    return {
        "schema": 1,
        "measured_at": started,
        "commit": git_commit(ROOT),
        "machine": {
            "cpu_model": cpu_model(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "hostname": platform.node(),
        },
    }


def measured_by(script: str, data: dict) -> str:
    """The provenance line of a figure from one of the docs' own measuring scripts."""
    machine = data["machine"]
    return (
        f"*By `{script}` on {machine['cpu_model']} ({machine['cpu_count']} cores), "
        f"commit {str(data['commit'])[:12]}, {data['measured_at']}.*"
    )


if __name__ == "__main__":
    sys.exit(main())

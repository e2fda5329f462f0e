"""The figures the manual and the README show from a run, drawn from a results file.

Nothing measured is typed into the docs: each figure is rendered from a stored results
file (``docs/results/*.json``, written by ``nox -s figures``) and says which machine
recorded it and when. The MkDocs hook (``docs/hooks.py``) renders the docs' markers at
build time; ``python docs/figures.py`` rewrites the README's generated block, and a test
checks it matches its results file.

Figures (``NAME RESULTS.json [KEY=VALUE ...]``):

- ``calibration``: the unit costs measured in the run (dispatch, kernel launch, transfer
  latency and bandwidth, copy bandwidth, profiler event);
- ``timing scenario=S size=Z``: the report's timing table of one scenario and size;
- ``counts scenario=S size=Z``: its counts table;
- ``diagnosis scenario=S size=Z``: its "What to change" list;
- ``glance``: the report's "At a glance" table;
- ``run-time``: where the run's time went (stages summed over the cells);
- ``gate-calibration``: the gate's calibration table from a ``scanbench gate --aa N
  --inject-slowdown F --json PATH`` file (false alarms, detections, smallest slowdown
  caught, per ``[[baseline]]`` rule).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import sys
from contextlib import redirect_stdout
from pathlib import Path

from scanbench.cli.main import build_parser
from scanbench.reports.model import build
from scanbench.store import Run, load_run

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
README_RESULTS = "docs/results/smoke.json"
README_BEGIN = "<!-- generated from"
README_END = "<!-- end of generated block -->"


def command_help(command: str = "") -> str:
    """The real ``scanbench [COMMAND] --help`` text (80 columns, as a terminal shows it)."""
    os.environ["COLUMNS"] = "80"  # argparse wraps to the terminal; fixed for the docs
    parser = build_parser()
    if command:
        subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        if command not in subparsers.choices:
            raise KeyError(
                f"no scanbench command {command!r}; choose one of {list(subparsers.choices)}"
            )
        parser = subparsers.choices[command]
    out = io.StringIO()
    with redirect_stdout(out):
        parser.print_help()
    return out.getvalue().rstrip()


def provenance(run: Run, path: Path) -> str:
    """Which machine recorded the run, and when."""
    env = run.environment
    versions = env.get("versions", {})
    relative = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
    return (
        f"*From `{relative}`: {env.get('cpu_model', '?')} ({env.get('cpu_count', '?')} cores), "
        f"{env.get('platform', '?')} x{env.get('device_count', '?')}, jax {versions.get('jax')}, "
        f"recorded {env.get('timestamp', '?')}.*"
    )


def _markdown(frame) -> str:
    return frame.to_markdown(index=False, disable_numparse=True)


def _table(run: Run, scenario: str, size: str):
    report = build([run])
    for table in report.tables:
        rows = table.rows
        if table.scenario == scenario and str(rows["size"].iloc[0]) == size:
            return table
    raise KeyError(f"the run has no table for scenario {scenario!r} at size {size!r}")


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.3g} s"


def calibration(run: Run) -> str:
    costs = run.environment.get("overheads") or {}
    bandwidth = (run.environment.get("memory_bandwidth") or {}).get("bytes_per_s")
    rows = [
        ("dispatch of a jitted call, queued", _seconds(costs.get("dispatch_queued_s"))),
        ("dispatch of a jitted call, waited for", _seconds(costs.get("dispatch_blocking_s"))),
        ("kernel launch (one thunk of a loop body)", _seconds(costs.get("kernel_launch_s"))),
        ("scan iteration (small carry)", _seconds(costs.get("scan_iteration_s"))),
        ("host-to-device transfer latency", _seconds(costs.get("h2d_latency_s"))),
        ("host-to-device bandwidth", f"{costs.get('h2d_bytes_per_s', 0) / 1e9:.3g} GB/s"),
        ("device-to-host transfer latency", _seconds(costs.get("d2h_latency_s"))),
        ("device-to-host bandwidth", f"{costs.get('d2h_bytes_per_s', 0) / 1e9:.3g} GB/s"),
        ("copy bandwidth (256 MiB, one thread)", f"{(bandwidth or 0) / 1e9:.3g} GB/s"),
        ("profiler cost per recorded event", _seconds(costs.get("profiler_event_s"))),
    ]
    lines = ["| unit cost | measured |", "| --- | --- |"]
    lines += [f"| {what} | {value} |" for what, value in rows]
    return "\n".join(lines)


def gate_calibration(path: Path) -> str:
    """The calibration table of a ``scanbench gate --aa --json`` file, with its machine
    and date."""
    from scanbench.gate.calibration import table

    data = json.loads(path.read_text(encoding="utf-8"))
    machine = data["machine"]
    relative = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
    settings = data["settings"]
    repetitions = data["calibration"]["repetitions"]
    return (
        f"{table(data['calibration'])}\n\n*From `{relative}`: {repetitions} repetitions of "
        f"each rule at confidence {settings['confidence']:g}, {settings['blocks']} blocks "
        f"(unless a rule says), {machine.get('cpu_model', '?')} "
        f"({machine.get('cpu_count', '?')} cores), jax "
        f"{(machine.get('versions') or {}).get('jax')}, recorded {machine.get('timestamp')}.*"
    )


def render(name: str, path: Path, options: dict[str, str]) -> str:
    """The figure ``name`` of the results file at ``path``, with its provenance."""
    if name == "gate-calibration":
        return gate_calibration(path)
    run = load_run(path)
    if name == "calibration":
        body = calibration(run)
    elif name in ("timing", "counts", "diagnosis"):
        table = _table(run, options["scenario"], options["size"])
        if name == "diagnosis":
            body = "\n".join(f"- **{backend}**: {text}" for backend, text in table.diagnoses)
        else:
            frame = table.timing if name == "timing" else table.counts
            body = _markdown(frame) if frame is not None else "(nothing measured)"
    elif name == "glance":
        body = _markdown(build([run]).glance)
    elif name == "run-time":
        body = _markdown(build([run]).run_time)
    else:
        raise KeyError(f"no figure {name!r}; see docs/figures.py")
    return f"{body}\n\n{provenance(run, path)}"


def readme_block(path: Path = ROOT / README_RESULTS) -> str:
    """The README's sample: the smoke run's TDMA timing table, trimmed to a few columns."""
    table = _table(load_run(path), "tridiagonal", "smoke")
    prefixes = ("backend", "strategy", "median", "speedup", "x BW bound")
    keep = table.timing[[c for c in table.timing.columns if c.startswith(prefixes)]]
    return (
        f"{README_BEGIN} {README_RESULTS} by `python docs/figures.py` -->\n\n"
        f"{_markdown(keep)}\n\n{provenance(load_run(path), path)}\n\n{README_END}"
    )


def readme_with_block(text: str, block: str) -> str:
    """The README with its generated block replaced."""
    pattern = re.compile(re.escape(README_BEGIN) + r".*?" + re.escape(README_END), re.S)
    if not pattern.search(text):
        raise ValueError("README.md has no generated block")
    return pattern.sub(lambda match: block, text, count=1)


if __name__ == "__main__":
    text = README.read_text(encoding="utf-8")
    README.write_text(readme_with_block(text, readme_block()), encoding="utf-8")
    print(f"README.md: the generated block redrawn from {README_RESULTS}", file=sys.stderr)

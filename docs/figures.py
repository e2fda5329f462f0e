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
- ``shards``: a gathered run's shards: their machines, cells, expected and measured
  seconds, and the balance;
- ``at-scale``: the at-scale estimate measured by ``docs/at_scale.py`` (its own JSON).
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
from scanbench.results import Run, load_run

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


def shards_table(run: Run) -> str:
    """Per shard of a gathered run: host, cells, seconds expected and measured; then the
    balance (longest shard over the mean), expected and measured."""
    from scanbench.execution.shards import balance

    gathered = run.invocation.gathered
    if gathered is None:
        raise KeyError("the run was not gathered from shards (no invocation.gathered)")
    lines = [
        "| shard | host | cells | expected | measured |",
        "| --- | --- | --- | --- | --- |",
    ]
    for shard in gathered.shards:
        lines.append(
            f"| {shard.index}/{gathered.count} | {shard.hostname} | {shard.cells} "
            f"| {shard.expected_s:.1f} s | {shard.measured_s:.1f} s |"
        )
    expected = balance([[shard.expected_s] for shard in gathered.shards])
    measured = balance([[shard.measured_s] for shard in gathered.shards])
    lines.append(f"| balance (longest / mean) | | | {expected[2]:.2f} | {measured[2]:.2f} |")
    return "\n".join(lines) + f"\n\nSplit by {gathered.unit}; costs from {gathered.costs}."


def _bytes(value: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B"


def _at_scale_rows(data: dict) -> list[tuple[str, str]]:
    table, cell = data["split"]["table"], data["split"]["cell"]
    nodes = data["nodes"]
    wall = table["longest_s"] + data["environment_s"] + data["gather_s"]
    return [
        ("cells (the run's, copied under new seeds)",
         f"{data['cells']} from {data['measured_cells']}"),
        ("their tables (kept whole by `--shard-by table`)", f"{data['tables']}"),
        ("sum of the cells' measured seconds (one machine)",
         f"{data['cell_seconds_total']:.0f} s"),
        ("the longest cell", f"{data['cell_seconds_max']:.0f} s"),
        (f"longest of {nodes} nodes, split by table (balance)",
         f"{table['longest_s']:.0f} s ({table['balance']:.2f})"),
        (f"longest of {nodes} nodes, split by cell (balance)",
         f"{cell['longest_s']:.0f} s ({cell['balance']:.2f})"),
        ("a node's fixed cost: collecting its environment", f"{data['environment_s']:.1f} s"),
        (f"gather of the {nodes} shard files", f"{data['gather_s']:.2f} s"),
        ("wall time: longest node + fixed cost + gather", f"{wall:.0f} s + queue wait"),
        (f"merged results file ({data['samples']} samples)", _bytes(data["merged_bytes"])),
        ("loading it", f"{data['load_s']:.2f} s"),
        ("its markdown report", f"{data['report_s']:.1f} s"),
        ("`history add` of it", f"{data['history_add_s']:.2f} s"),
        ("its history entry", _bytes(data["entry_bytes"])),
        (f"reading a history of {data['history_entries']} such entries",
         f"{data['history_read_s']:.1f} s"),
    ]  # fmt: skip


def at_scale(path: Path) -> str:
    """The at-scale estimates (``docs/at_scale.py``'s JSON): a column per results file
    the cells were drawn from, with where and when it was measured."""
    estimates = json.loads(path.read_text(encoding="utf-8"))["estimates"]
    columns = [dict(_at_scale_rows(data)) for data in estimates]
    names = [f"from `{data['results']}`" for data in estimates]
    lines = ["| quantity | " + " | ".join(names) + " |", "| --- |" + " --- |" * len(names)]
    for what in columns[0]:
        lines.append(f"| {what} | " + " | ".join(column[what] for column in columns) + " |")
    env, when = estimates[0]["environment"], estimates[0]["measured_at"]
    return "\n".join(lines) + (
        f"\n\n*By `docs/at_scale.py` on {env.get('cpu_model', '?')} "
        f"({env.get('cpu_count', '?')} cores), jax {(env.get('versions') or {}).get('jax')}, "
        f"{when}; the queue wait is the cluster's, not measured here.*"
    )


def render(name: str, path: Path, options: dict[str, str]) -> str:
    """The figure ``name`` of the results file at ``path``, with its provenance."""
    if name == "at-scale":
        return at_scale(path)
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
    elif name == "shards":
        body = shards_table(run)
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

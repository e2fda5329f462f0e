"""The figures the manual and the README show from a run, drawn from a results file, and
the one command that writes every generated block of the Markdown sources.

Nothing measured is typed into the docs: each figure is rendered from a stored results
file (``docs/results/*.json``, written by ``nox -s figures``) and says which machine
recorded it and when. ``python docs/figures.py`` writes every generated block of the
README and the manual (`blocks`: results figures, ``--help`` texts, tables drawn from the
code by `tables`) into the Markdown sources, so that GitHub shows what the built site
shows, and plots as SVG files under ``docs/img/``; ``--check`` changes nothing and exits
1 naming each block that differs from what the code and the committed results give.

Figures (``figure: NAME RESULTS.json [KEY=VALUE ...]``):

- ``calibration``: the unit costs measured in the run (dispatch, kernel launch, transfer
  latency and bandwidth, copy bandwidth, profiler event);
- ``timing scenario=S size=Z``: the report's timing table of one scenario and size;
- ``summary scenario=S size=Z``: the same, trimmed to backend, strategy, median, speedup
  and the bound (the README's sample);
- ``counts scenario=S size=Z``: its counts table;
- ``diagnosis scenario=S size=Z``: its "What to change" list;
- ``time-bars scenario=S size=Z``: the report's plot of each backend's median (an SVG);
- ``decomposition scenario=S size=Z``: the report's plot of where each backend's time
  goes (an SVG);
- ``glance``: the report's "At a glance" table;
- ``run-time``: where the run's time went (stages summed over the cells);
- ``shards``: a gathered run's shards: their machines, cells, expected and measured
  seconds, and the balance;
- ``at-scale``: the at-scale estimate measured by ``docs/at_scale.py`` (its own JSON);
- ``harness-speed``: the wall times of scanbench's own main jobs and their split,
  measured by ``docs/harness_speed.py`` (``nox -s perf``, its own JSON).
- ``gate-calibration``: the gate's calibration table from a ``scanbench gate --aa N
  --inject-slowdown F --json PATH`` file (false alarms, detections, smallest slowdown
  caught, per ``[[baseline]]`` rule).
- ``worker-start``: workers forked by the fork server against spawned ones, the same
  cells alternating (``docs/worker_start.py``'s JSON): the ratio of their medians, and
  each one's start-up.
- ``compare``: the README's ``compare()`` example, its printed table and "What to
  change" line (``docs/compare_example.py``'s JSON, written by running it).
- ``diagnosis-score``: each JAX backend's lead "What to change" applied and measured
  (``tests/benchmarks/score_diagnosis.py``'s JSON): predicted and measured gain, the rate
  at which the lead helped.
- ``growth``: a grown run's (``scanbench run --grow``) fitted costs per backend, then its
  crossovers with their confirmations and its trends, as the report states them;
- ``growth-plot``: its log-log plot of time per call along the axis (an SVG);
- ``archives scenario=S size=Z``: the report's final-archive heatmaps of a QD table (an
  SVG);
- ``qd-seeds``: coverage and QD score of pyribs' and the JAX CMA-ME over seeds
  (``docs/qd_seeds.py``'s JSON);
- ``qd-backends scenario=S size=Z also=B.json,C.json``: per backend of a QD table, over
  the runs of several seeds (``scanbench run --seed N``, one file each): the median time
  per call and per generation, evaluations per second, and the final archive's coverage
  and QD score (minimum, median, maximum over the seeds).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import io
import json
import os
import re
import sys
from contextlib import redirect_stdout
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import blocks
import harness_speed
import qd_seeds
import tables
import worker_start

from scanbench.cli.main import build_parser
from scanbench.reports import plots
from scanbench.reports.audit import audit
from scanbench.reports.growth_plot import growth_plot
from scanbench.reports.growth_section import growth_sections
from scanbench.reports.model import build
from scanbench.results import Run
from scanbench.results import load_run as _load_run

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "img"
DIGEST = re.compile(r"<dc:description>scanbench-figure ([0-9a-f]{64})</dc:description>")


@functools.cache
def load_run(path: Path) -> Run:
    """A results file, read once per process (the figures of a page share it)."""
    return _load_run(path)


@functools.cache
def report(path: Path):
    """The report model of one results file, built once per process."""
    return build([load_run(path)])


@functools.cache
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


def shown_path(path: Path) -> Path:
    """``path`` as a page names it: relative to the repository when inside it."""
    return path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path


def _stored_machine(machine: dict) -> str:
    """``AMD EPYC (2 cores), jax 0.10.2, recorded <time>`` of a stored ``machine`` block
    (the gate's calibration, the diagnosis score)."""
    return (
        f"{machine.get('cpu_model', '?')} ({machine.get('cpu_count', '?')} cores), jax "
        f"{(machine.get('versions') or {}).get('jax')}, recorded {machine.get('timestamp')}"
    )


def provenance(run: Run, path: Path) -> str:
    """Which machine recorded the run, and when."""
    env = run.environment
    versions = env.get("versions", {})
    relative = shown_path(path)
    return (
        f"*From `{relative}`: {env.get('cpu_model', '?')} ({env.get('cpu_count', '?')} cores), "
        f"{env.get('platform', '?')} x{env.get('device_count', '?')}, jax {versions.get('jax')}, "
        f"recorded {env.get('timestamp', '?')}.*"
    )


def _markdown(frame) -> str:
    return frame.to_markdown(index=False, disable_numparse=True)


def _table(path: Path, scenario: str, size: str):
    for table in report(path).tables:
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


def _plot(name: str, path: Path, options: dict[str, str]) -> plots.Plot | None:
    if name == "growth-plot":
        section = _growth_section(path)
        return growth_plot(section.analysis, section.title)
    table = _table(path, options["scenario"], options["size"])
    if name == "time-bars":
        return plots.time_bars(table.ok, table.title)
    if name == "archives":
        return plots.archive_heatmaps(table.ok, table.title)
    return plots.decomposition_bars(table.ok, table.title)


def _growth_section(path: Path):
    """The one sweep of a grown results file, as the report reads it."""
    sections = growth_sections([load_run(path)])
    if len(sections) != 1:
        raise KeyError(f"{path.name}: {len(sections)} growth sweeps, the figure draws one")
    return sections[0]


def qd_backends(path: Path, options: dict[str, str]) -> str:
    """Per backend of a QD table over the runs of several seeds (`describe` output)."""
    import statistics

    paths = [path, *(ROOT / other for other in options.get("also", "").split(",") if other)]
    found: dict[str, list[dict]] = {}
    seeds = []
    for one in paths:
        records = [
            record
            for record in load_run(one).records
            if record.scenario == options["scenario"]
            and record.size == options["size"]
            and record.status == "ok"
        ]
        seeds.extend(sorted({record.seed for record in records}))
        for record in records:
            output = record.extra.get("output") or {}
            label = record.backend + (f" ({record.devices} devices)" if record.devices else "")
            found.setdefault(label, []).append(
                {
                    "median_s": record.stats["median"],
                    "work": record.work,
                    "coverage": output.get("coverage"),
                    "qd_score": (output.get("qd_score_per_generation") or [None])[-1],
                }
            )

    def spread(values: list, form: str) -> str:
        values = [v for v in values if v is not None]
        if not values:
            return "-"
        low, mid, high = min(values), statistics.median(values), max(values)
        return ", ".join(form.format(v) for v in (low, mid, high))

    rows = [
        "| backend | runs | median per call | per generation | evaluations/s "
        "| coverage: min, median, max | QD score: min, median, max |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, runs in found.items():
        median = statistics.median(run["median_s"] for run in runs)
        work = runs[0]["work"]
        rows.append(
            f"| {label} | {len(runs)} | {_seconds(median)} "
            f"| {_seconds(median / work['generations'])} "
            f"| {work['evaluations'] / median:,.0f} "
            f"| {spread([run['coverage'] for run in runs], '{:.3f}')} "
            f"| {spread([run['qd_score'] for run in runs], '{:.1f}')} |"
        )
    shown = ", ".join(str(seed) for seed in seeds)
    files = ", ".join(f"`{shown_path(one)}`" for one in paths)
    return "\n".join(rows) + f"\n\nSeeds {shown}, one run each: {files}."


def growth(path: Path) -> str:
    """A sweep's fitted costs, crossovers (with their confirmations) and trends."""
    section = _growth_section(path)
    sentences = [*section.crossovers, *section.trends, *section.notes]
    lines = [f"**{section.title}**", "", _markdown(section.fits), ""]
    lines += [f"- {sentence}" for sentence in sentences]
    return "\n".join(lines)


def _digest(path: Path, plot: plots.Plot, name: str, options: dict[str, str]) -> str:
    """What the SVG is drawn from: the results file, the figure's arguments, its title and
    caption, and the code that draws it (so that a change of either marks it stale)."""
    source = Path(plots.__file__).read_bytes()
    parts = [path.read_bytes(), source, repr((name, sorted(options.items()))).encode()]
    parts += [plot.title.encode(), plot.caption.encode()]
    return hashlib.sha256(b"\0".join(parts)).hexdigest()


def image(name: str, path: Path, options: dict[str, str], page: Path, write: bool) -> str:
    """A plot of the report as a committed SVG file, linked from ``page``; the file is
    (re)drawn only when what it is drawn from changed (``write``), else it must be current."""
    run = load_run(path)
    plot = _plot(name, path, options)
    if plot is None:
        raise KeyError(f"figure {name!r} of {path.name} {options}: nothing to plot")
    named = "".join(f"-{options[key]}" for key in ("scenario", "size") if key in options)
    file = IMAGES / f"{path.stem}{named}-{name}.svg"
    digest = _digest(path, plot, name, options)
    found = DIGEST.search(file.read_text(encoding="utf-8")) if file.exists() else None
    if found is None or found[1] != digest:
        if not write:
            raise StaleImage(f"{file.relative_to(ROOT)} is stale: run `python docs/figures.py`")
        IMAGES.mkdir(exist_ok=True)
        import matplotlib

        with matplotlib.rc_context({"svg.hashsalt": "scanbench", "svg.fonttype": "none"}):
            plot.figure.savefig(
                file,
                format="svg",
                bbox_inches="tight",
                metadata={"Date": None, "Description": f"scanbench-figure {digest}"},
            )
        print(f"redrawn: {file.relative_to(ROOT)}", file=sys.stderr)
    link = os.path.relpath(file, page.parent).replace(os.sep, "/")
    return f"![{plot.title}]({link})\n\n{plot.caption}\n\n{provenance(run, path)}"


class StaleImage(Exception):
    """A committed SVG is not what the code and the committed results draw now."""


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
        ("merged results file", f"{_bytes(data['merged_bytes'])} ({data['samples']:,} samples)"),
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


def gate_calibration(path: Path) -> str:
    """The calibration table of a ``scanbench gate --aa --json`` file, with its machine
    and date."""
    from scanbench.gate.calibration import table, worker_pairs
    from scanbench.gate.rules import BaselineRule

    data = json.loads(path.read_text(encoding="utf-8"))
    machine = data["machine"]
    relative = shown_path(path)
    settings = data["settings"]
    repetitions = data["calibration"]["repetitions"]
    rules = [BaselineRule(**rule) for rule in data.get("rules") or []]  # as --json stores them
    pairs = worker_pairs(rules, settings["worker_pairs"])
    return (
        f"{table(data['calibration'], pairs)}\n\n*From `{relative}`: {repetitions} repetitions of "
        f"each rule at confidence {settings['confidence']:g}, {settings['blocks']} blocks "
        f"(unless a rule says), {_stored_machine(machine)}.*"
    )


def _gain(value: float | None, low: float | None, high: float | None) -> str:
    if value is None:
        return "-"
    if high is None and low == value:  # a priced overhead's floor
        return f">= {value:.2f}x"
    bounds = [f"{bound:.2f}" if bound is not None else "?" for bound in (low, high)]
    return f"{value:.2f}x [{bounds[0]}, {bounds[1]}]"


def diagnosis_score(path: Path) -> str:
    """The score table of ``tests/benchmarks/score_diagnosis.py``'s JSON: per JAX backend,
    its lead, the backend it names, the gain predicted by the run and the gain measured
    interleaved; then how often the lead helped, with the machine and the dates."""
    data = json.loads(path.read_text(encoding="utf-8"))
    lines = [
        "| scenario | backend | lead | it says | applied as | predicted gain | measured gain "
        "(interleaved) | measured / predicted | verdict |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    rows = data["rows"]
    for row in rows:
        measured = row.get("gain")
        share = f"{measured / row['predicted']:.2f}" if measured and row["predicted"] else "-"
        if measured and row["predicted_high"] is None:  # a floor: "at least"
            share = f"{share} (of a floor)"
        said = row.get("caveats")
        caveats = f"; the run said it may not hold: {', '.join(said)}" if said else ""
        lines.append(
            f"| {row['scenario']} | {row['backend']} | {row['cost']} | {row['fix']} | "
            f"{row['variant'] or '(names no backend)'} | "
            f"{_gain(row['predicted'], row['predicted_low'], row['predicted_high'])} | "
            f"{_gain(measured, row.get('gain_low'), row.get('gain_high'))} | {share} | "
            f"{row['verdict']}{' (as predicted)' if row.get('as_predicted') else ''}{caveats} |"
        )
    applied = [row for row in rows if row["verdict"] != "not applied"]
    helped = sum(row["verdict"] == "helped" for row in applied)
    held = sum(bool(row.get("as_predicted")) for row in applied)
    settings, machine = data["settings"], data["machine"]
    relative = shown_path(path)
    return "\n".join(lines) + (
        f"\n\nThe lead helped in **{helped} of {len(applied)}** backends it could be applied "
        f"to; its predicted interval overlapped the measured one in {held} of {len(applied)}; "
        f"{len(rows) - len(applied)} named no backend.\n\n*From `{relative}`: the leads of "
        f"`{data['run']}` (recorded {data['run_recorded']}); each switch measured in "
        f"{settings['blocks']} interleaved blocks of {settings['per_block']} calls a side, "
        f"{settings['pairs']} worker pairs, {settings['confidence']:.0%} exact interval of "
        f"the median block ratio; {_stored_machine(machine)}.*"
    )


def compare_example(path: Path) -> str:
    """The README's ``compare()`` example (``docs/compare_example.py``, between its
    ``# example`` markers), what it printed (stored at ``path``) and where it ran."""
    source = (ROOT / "docs" / "compare_example.py").read_text(encoding="utf-8")
    code = source.split("# example\n", 1)[1].split("# end example", 1)[0]
    code = code.replace("  # noqa: E402", "").strip()
    data = json.loads(path.read_text(encoding="utf-8"))
    return (
        f"```python\n{code}\n```\n\nprints\n\n```text\n{data['output']}\n```\n\n"
        f"*Printed by `docs/compare_example.py` into `{shown_path(path)}`: "
        f"{_stored_machine(data['machine'])}.*"
    )


def lead_audit(path: Path) -> str:
    """How often a "faster backend" lead says why, on one results file (`audit`)."""
    audited = audit(report(path))
    rows = [
        "| cell | faster neighbour | ratio | gap per call | explained | largest difference |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for lead in audited:
        gap = "-" if lead.gap_s is None else _seconds(lead.gap_s)
        rows.append(
            f"| {lead.scenario}/{lead.size}/{lead.backend} | {lead.neighbour} | "
            f"{lead.ratio:.2f}x | {gap} | {lead.explained:.0%} | {lead.largest or '-'} |"
        )
    why = sum(lead.says_why for lead in audited)
    wrong = sum(bool(lead.problems) for lead in audited)
    head = (
        f"{why} of {len(audited)} sentences that name a faster backend name differences "
        f"that explain at least half of their gap; {wrong} cite a figure their table "
        "does not give."
    )
    return head + "\n\n" + "\n".join(rows)


def render(name: str, path: Path, options: dict[str, str]) -> str:
    """The figure ``name`` of the results file at ``path``, with its provenance."""
    if name == "compare":
        return compare_example(path)
    if name == "diagnosis-score":
        return diagnosis_score(path)
    if name == "at-scale":
        return at_scale(path)
    if name == "lead-audit":
        return f"{lead_audit(path)}\n\n{provenance(load_run(path), path)}"
    if name == "harness-speed":
        return harness_speed.render(json.loads(path.read_text(encoding="utf-8")))
    if name == "gate-calibration":
        return gate_calibration(path)
    if name == "worker-start":
        return worker_start.render(json.loads(path.read_text(encoding="utf-8")))
    if name == "qd-seeds":
        return qd_seeds.render(json.loads(path.read_text(encoding="utf-8")))
    run = load_run(path)
    if name == "calibration":
        body = calibration(run)
    elif name in ("timing", "counts", "diagnosis", "summary"):
        table = _table(path, options["scenario"], options["size"])
        if name == "diagnosis":
            body = "\n".join(f"- **{backend}**: {text}" for backend, text in table.diagnoses)
        elif name == "summary":
            prefixes = ("backend", "strategy", "median", "speedup", "x BW bound")
            keep = [c for c in table.timing.columns if c.startswith(prefixes)]
            body = _markdown(table.timing[keep])
        else:
            frame = table.timing if name == "timing" else table.counts
            body = _markdown(frame) if frame is not None else "(nothing measured)"
    elif name == "glance":
        body = _markdown(report(path).glance)
    elif name == "run-time":
        body = f"{_markdown(report(path).run_time)}\n\n{report(path).run_time_note}"
    elif name == "shards":
        body = shards_table(run)
    elif name == "growth":
        body = growth(path)
    elif name == "qd-backends":
        body = qd_backends(path, options)
    else:
        raise KeyError(f"no figure {name!r}; see docs/figures.py")
    return f"{body}\n\n{provenance(run, path)}"


def renderer(write: bool):
    """The function that draws a block of a page (`blocks.regenerate`)."""

    def draw(block: blocks.Block) -> str:
        try:
            if block.kind == "scanbench-help":
                return f"```text\n{command_help(block.args)}\n```"
            if block.kind == "table":
                return tables.render(block.args, block.page)
            name, path, *rest = block.args.split()
            options = dict(option.split("=", 1) for option in rest)
            if name in ("time-bars", "decomposition", "archives", "growth-plot"):
                return image(name, ROOT / path, options, block.page, write)
            return render(name, ROOT / path, options)
        except (KeyError, ValueError, OSError) as error:
            raise ValueError(f"{block.where}: {block.kind}: {block.args}: {error}") from error

    return draw


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    try:
        found = blocks.stale(renderer(write=not args.check))
    except StaleImage as error:
        print(f"stale: {error}", file=sys.stderr)
        return 1
    if not args.check and found:  # what was written (an image, a page) may show in the layout
        for page, fresh in found.items():
            page.write_text(fresh, encoding="utf-8")
            print(f"redrawn: {page.relative_to(ROOT)}", file=sys.stderr)
        found = blocks.stale(renderer(write=True))
    for page, fresh in found.items():
        old = page.read_text(encoding="utf-8")
        where = f"{page.relative_to(ROOT)}: {blocks.first_difference(old, fresh)}"
        if args.check:
            print(f"stale: {where}", file=sys.stderr)
        else:
            page.write_text(fresh, encoding="utf-8")
            print(f"redrawn: {page.relative_to(ROOT)}", file=sys.stderr)
    if args.check and found:
        print("run `python docs/figures.py` and commit the pages", file=sys.stderr)
    return 1 if args.check and found else 0


if __name__ == "__main__":
    sys.exit(main())

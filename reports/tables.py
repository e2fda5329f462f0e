"""The report tables as DataFrames of formatted strings, shared by markdown and HTML.

Each function takes rows of `scanbench.reports.frame.records_frame` (one table = one scenario, size,
dtype and device) and returns what a reader sees; the renderers only choose the markup.
"""

from __future__ import annotations

import functools
import math
import textwrap
from collections.abc import Iterator, Sequence

import pandas as pd

from scanbench.checkout import own_commit, version
from scanbench.gathered import shard_environments
from scanbench.results import Run
from scanbench.units import format_duration, format_seconds, number

from .frame import GROUP, NOT_JITTED, without_interval


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _ratio(value: float | None) -> str:
    return "-" if _missing(value) else f"{value:.2f}"


def _count(value: float | None) -> str:
    if _missing(value):
        return "-"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _transfers(count, nbytes, unknown) -> str:
    if _missing(count):
        return "-"
    text = _count(count)
    if count and unknown == count:
        text += " (size not logged)"
    elif count:
        text += f" ({number(nbytes)}B"
        text += f" + {_count(unknown)} of unknown size)" if unknown else ")"
    return text


def _pct(value) -> str:
    return "-" if _missing(value) else f"{value:.0f}%"


def tables(frame: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame]]:
    """(title, rows) per scenario, size, dtype and device, in the order first measured."""
    if frame.empty:
        return
    for key, group in frame.groupby(GROUP, sort=False):
        yield " / ".join(str(part) for part in key), group.sort_values(["run", "order"])


def _backend_column(ok: pd.DataFrame) -> pd.Series:
    """Backend names, suffixed with the run when one table holds several runs."""
    if ok["run"].nunique() > 1:
        return ok["backend"] + " (run " + ok["run"].astype(str) + ")"
    return ok["backend"]


DISTURBED_MARK = " (disturbed)"
UNCHECKED_MARK = " (unchecked)"  # timed without comparing its output (Backend.checked)


def _x_fastest(row) -> str:
    if row.strategy == "roofline":
        return "(limit)"
    text = _ratio(row.x_fastest)
    if row.fastest:
        return text + " fastest"
    return text + " tie" if row.tie else text


def fastest_names(ok: pd.DataFrame) -> str:
    """The fastest backend of a table and those tied with it: "a = b (tie)"."""
    best = ok.loc[ok["fastest"].astype(bool), "backend"].tolist()
    tied = ok.loc[ok["tie"].astype(bool), "backend"].tolist()
    return " = ".join(best + tied) + (" (tie)" if tied else "")


def disturbed_notes(ok: pd.DataFrame) -> list[str]:
    """One line per disturbed cell: why its numbers may not hold; and one per cell
    measured again, saying what the measurements set aside had."""
    notes = []
    for row in ok.itertuples():
        if row.disturbed:
            notes.append(
                f"{row.backend}: disturbed ({row.disturbed_why}); its numbers may not hold"
            )
        if getattr(row, "set_aside", 0):
            kept = "the quietest (also disturbed)" if row.disturbed else "the last (undisturbed)"
            notes.append(
                f"{row.backend}: measured {row.set_aside + 1} times; the numbers are of "
                f"{kept}, {row.set_aside} set aside as disturbed ({row.set_aside_why})"
            )
    return notes


def compile_notes(ok: pd.DataFrame) -> list[str]:
    """One line giving each JAX row's time to a first result (prepare and the first
    call) by JAX's stages, where the worker recorded them: what a compile time is made of."""
    if "compile_xla_s" not in ok or "engine" not in ok:
        return []
    rows = ok[(ok["engine"] == "jax") & ok["compile_xla_s"].notna()]
    if rows.empty:
        return []
    parts = [
        f"{row.backend} {format_seconds(row.compile_trace_s)} / "
        f"{format_seconds(row.compile_lower_s)} / {format_seconds(row.compile_xla_s)} / "
        f"{format_seconds(row.compile_rest_s)}"
        for row in rows.itertuples()
    ]
    return [
        "compile by stage: trace / lower / XLA compile / the rest (placing the inputs, host "
        "work), of the prepare and the first call together, for " + "; ".join(parts)
    ]


def _precision(row) -> str:
    """Samples and the half-width of the 95% interval of the median: "42 (±0.9%)";
    "n=1: no interval" without one (`frame.without_interval`)."""
    count = row.samples
    if _missing(count):
        return "-"
    if without_interval(count, row.rel_width):
        return f"n={int(count)}: no interval"
    return f"{int(count)} (±{row.rel_width * 50:.2g}%)"


def _bound_cell(row) -> str:
    """``2.05 (L3)``: the ratio to the memory bound and the level it is the bound of."""
    ratio = number(row.x_bandwidth)
    level = getattr(row, "bound_level", None)
    return f"{ratio} ({level})" if level and ratio != "-" else ratio


def _compile(row) -> str:
    return "not jitted" if row.engine == NOT_JITTED else format_seconds(row.compile_s)


def _cores(row) -> str:
    """``1.9`` measured; ``1.9 (busy)`` measured while other programs held the cores;
    ``1 (declared)`` for results stored before the cores were measured."""
    if _missing(row.cores):
        return "-"
    if not row.cores_measured:
        return f"{row.cores:g} (declared)"
    return f"{row.cores:.1f}" + (" (busy)" if row.cores_contended else "")


def scaled_notes(ok: pd.DataFrame) -> list[str]:
    """One line per cell measured on part of the work (≈ in the table)."""
    return [
        f"{row.backend}: ≈ measured on {row.scaled_from} and scaled x{row.scale:g} "
        "(one whole call would exceed the time budget); its counts are of the whole call"
        for row in ok.itertuples()
        if row.scale != 1.0
    ]


def shard_notes(ok: pd.DataFrame) -> list[str]:
    """One line when a table's cells were measured by several shards of a gathered run
    (``--shard-by cell``): its ratios then compare only cells of one shard."""
    if "shard" not in ok or ok["shard"].nunique() < 2:
        return []
    parts = [
        f"shard {shard}: " + ", ".join(rows["backend"])
        for shard, rows in ok.groupby("shard", sort=True)
    ]
    return [
        "measured by several machines (a run gathered from shards split by cell): "
        "*speedup* and *x fastest* compare only cells of one shard; " + "; ".join(parts)
    ]


def flag_notes(ok: pd.DataFrame) -> list[str]:
    """The XLA flags backends declare (`scanbench.api.Backend.xla_flags`): one line per set
    of flags naming the backends (" +xla" in the table) that ran with them, and one per
    backend measured in a process that started without them."""
    if "xla_flags" not in ok:
        return []
    declared = ok[ok["xla_flags"] != ""]
    notes = []
    for (flags, applied), rows in declared.groupby(["xla_flags", "xla_flags_applied"], sort=False):
        names = ", ".join(rows["backend"])
        if applied:
            notes.append(f"+xla: {names} ran with the XLA flags declared by the backend: {flags}")
        else:
            notes.append(
                f"{names}: declares the XLA flags {flags}, which this process did not start "
                "with: measured without them (the cell workers of `scanbench run` apply them)"
            )
    return notes


def warmup_notes(ok: pd.DataFrame) -> list[str]:
    """Which cells took no separate warm-up call (their first call took over 1 s)."""
    if "warmup_skipped" not in ok or not ok["warmup_skipped"].any():
        return []
    names = ", ".join(ok.loc[ok["warmup_skipped"], "backend"])
    return [f"no warm-up call: the checked first call took over 1 s and warmed up ({names})"]


def timing_table(ok: pd.DataFrame) -> pd.DataFrame:
    """Time, compile, throughput and ratios of the cells that ran (with "x roofline" when
    the table holds the scenario's roofline kernel)."""
    table = _timing_table(ok)
    if ok["x_roofline"].notna().any():
        table.insert(
            table.columns.get_loc("x BW bound"), "x roofline", ok["x_roofline"].map(_ratio).values
        )
    return table


def _timing_table(ok: pd.DataFrame) -> pd.DataFrame:
    unit = ok["unit"].iloc[0] or "calls"
    baseline = ok["baseline"].iloc[0]
    # no speedup column for a scenario without a sequential backend to be faster than
    speedup = {f"speedup vs {baseline}": ok["speedup"].map(_ratio)} if pd.notna(baseline) else {}
    medians = [
        ("≈ " if row.scale != 1.0 else "") + format_seconds(row.median_s) for row in ok.itertuples()
    ]
    medians = medians + ok["disturbed"].map(lambda flag: DISTURBED_MARK if flag else "")
    medians = medians + ok["checked"].map(lambda checked: "" if checked else UNCHECKED_MARK)
    return pd.DataFrame(
        {
            "backend": _backend_column(ok),
            "strategy": ok["strategy"],
            "median": medians,
            "IQR": ok["iqr_s"].map(format_seconds),
            "n (±)": [_precision(row) for row in ok.itertuples()],
            "compile": [_compile(row) for row in ok.itertuples()],
            "cores": [_cores(row) for row in ok.itertuples()],
            f"{unit}/s": ok["throughput"].map(number),
            "GB/s": ok["gbps"].map(number),
            **speedup,
            "x fastest": [_x_fastest(row) for row in ok.itertuples()],
            "x BW bound": [_bound_cell(row) for row in ok.itertuples()],
            "memory (x min)": memory_column(ok),
        }
    )


def counts_table(ok: pd.DataFrame) -> pd.DataFrame:
    """Per-call counts and the time decomposition of the cells that ran."""
    d2h = [
        row.d2h_note if row.d2h_note and pd.isna(row.d2h) else _transfers(row.d2h, row.d2h_bytes, 0)
        for row in ok.itertuples()
    ]
    return pd.DataFrame(
        {
            "backend": _backend_column(ok),
            "dispatches": ok["dispatches"].map(_count),
            "kernels (trace)": ok["kernels_trace"].map(_count),
            "kernels (static)": ok["kernels_static"].map(_count),
            "GPU launch equiv.": ok["launch_equivalent"].map(_count),
            "H2D": [_transfers(r.h2d, r.h2d_bytes, r.h2d_unknown) for r in ok.itertuples()],
            "D2H": d2h,
            "dispatch": ok["dispatch_pct"].map(_pct),
            "launch": ok["launch_pct"].map(_pct),
            "transfer": [_pct_range(r) for r in ok.itertuples()],
            "sync": [_sync(r) for r in ok.itertuples()],
            "recompile": ok["compile_pct"].map(_pct),
            "device": [_traced(r, r.device_pct) for r in ok.itertuples()],
            "host": [_traced(r, None, _host(r)) for r in ok.itertuples()],
        }
    )


UNRELIABLE_MARK = " (unreliable)"  # a share of a traced call that does not describe the median


def _traced(row, value, text: str | None = None) -> str:
    """A share measured in the traced call, marked when the decomposition says it does
    not describe the median (`scanbench.decomposition`: see the note under the table)."""
    shown = _pct(value) if text is None else text
    reliable = getattr(row, "reliable", True)
    return shown if reliable or shown == "-" else shown + UNRELIABLE_MARK


def _sync(row) -> str:
    """The waits' share; ``≤ N%`` where it is the upper bound of results stored before
    the device-idle time inside waits was measured."""
    if not _missing(row.sync_pct) and row.sync_pct == 0:
        return _pct(row.sync_pct)  # no waits: nothing traced to misread
    shown = _traced(row, row.sync_pct)
    return "≤ " + shown if getattr(row, "sync_bound", False) and shown != "-" else shown


def unreliable_notes(ok: pd.DataFrame) -> list[str]:
    """One line per cell whose traced shares do not describe its median."""
    if "reliable" not in ok:
        return []
    return [
        f"{row.backend}: its traced shares (device, host, sync) do not describe the median: "
        f"{row.unreliable}; the diagnosis reads its counts alone"
        for row in ok.itertuples()
        if not row.reliable
    ]


def _pct_range(row) -> str:
    """The transfer share, with its range when a transfer's path is unknown."""
    low, high = row.transfer_low_pct, row.transfer_high_pct
    if _missing(low) or _missing(high) or high - low < 0.5:
        return _pct(row.transfer_pct)
    return f"{_pct(low)}-{_pct(high)}"


def _host(row) -> str:
    """The host rest; in results without measured device time, the whole remainder."""
    if _missing(row.host_pct):
        text = "-" if _missing(row.remainder_pct) else f"{_pct(row.remainder_pct)} (+device)"
    else:
        text = _pct(row.host_pct)
    if row.overlap:
        excess = row.overlap_pct
        text += " (overlap" + ("" if _missing(excess) else f" {_pct(excess)}") + ")"
    return text


def _bytes(value) -> str:
    return "-" if _missing(value) else number(value) + "B"


def _peak(row) -> str:
    if _missing(row.mem_peak):
        return "-"
    return ("≤ " if not row.mem_exact else "") + _bytes(row.mem_peak)


def memory_column(ok: pd.DataFrame) -> list[str]:
    """``peak (x minimum)`` per cell, for the timing table."""
    return [
        _peak(row) + ("" if _missing(row.x_minimum) else f" (x{row.x_minimum:.2g})")
        for row in ok.itertuples()
    ]


def memory_table(ok: pd.DataFrame) -> pd.DataFrame:
    """Measured peak, the minimum, and XLA's static plan with its largest temporaries."""
    return pd.DataFrame(
        {
            "backend": _backend_column(ok),
            "peak (measured)": [_peak(row) for row in ok.itertuples()],
            "minimum": ok["mem_minimum"].map(_bytes),
            "x minimum": ok["x_minimum"].map(lambda v: "-" if _missing(v) else f"{v:.2f}"),
            "XLA plan": ok["mem_planned"].map(_bytes),
            "XLA temporaries": ok["mem_temp"].map(_bytes),
            "largest temporaries": [
                ", ".join(f"{name} {_bytes(size)}" for name, size in row.mem_temporaries[:3]) or "-"
                for row in ok.itertuples()
            ],
            "note": ok["mem_note"],
        }
    )


TEMPORARIES_DOMINATE = 0.5  # XLA temporaries / minimum above which a note names them


def memory_notes(ok: pd.DataFrame) -> list[str]:
    """Cells whose XLA temporaries are at least half the work's minimum (where the minimum
    means something: `scanbench.reports.frame.MEANINGFUL_MINIMUM_BYTES`), naming the largest: what
    a layout or a fusion could save."""
    notes = []
    for row in ok.itertuples():
        if _missing(row.mem_temp) or _missing(row.x_minimum):
            continue
        share = row.mem_temp / row.mem_minimum
        if share >= TEMPORARIES_DOMINATE and row.mem_temporaries:
            largest = ", ".join(f"{name} {_bytes(size)}" for name, size in row.mem_temporaries[:3])
            notes.append(
                f"{row.backend}: XLA plans {_bytes(row.mem_temp)} of temporaries, {share:.1f}x "
                f"the minimum the work holds; largest: {largest}"
            )
    return notes


def linear_notes(ok: pd.DataFrame) -> list[str]:
    """How counts were made exact at this size: "counted at generations = 2, 3, 4 and
    extrapolated to 20: dispatches = fixed + per generation x 20 (scanned: 1 + 0 x 20)"."""
    rows = ok[ok["linear_along"].notna()] if "linear_along" in ok else ok.iloc[0:0]
    if rows.empty:
        return []
    along, n = rows["linear_along"].iloc[0], int(rows["linear_n"].iloc[0])
    parts = []
    for row in rows.itertuples():
        for label, model in (("dispatches", row.linear_dispatches), ("H2D", row.linear_h2d)):
            if isinstance(model, list | tuple) and len(model) == 2:
                parts.append(f"{row.backend} {label} {_count(model[0])} + {_count(model[1])} x {n}")
    return [
        f"Counted at {along} = 2, 3, 4 and extrapolated exactly to {n} "
        f"(count = fixed + per unit x {along}): " + "; ".join(parts)
    ]


def problems(group: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(backend, status, first line of the error) per failed or skipped cell."""
    return [
        (row.backend, row.status, row.error.splitlines()[0] if row.error else "")
        for row in group[group["status"] != "ok"].itertuples()
    ]


@functools.cache
def rendering_code() -> tuple[str | None, str]:
    """The commit of the checkout rendering reports (None: installed from a wheel) and
    scanbench's version: asked of git once per process (`scanbench.checkout`)."""
    return own_commit(), version() or "unknown"


def environment_lines(runs: Sequence[Run]) -> list[str]:
    """One line per run: machine, device, versions, bandwidth, flags, commit, time (a run
    gathered from shards: one per shard)."""
    lines = []
    for index, run in enumerate(runs):
        gathered = run.invocation.gathered
        if gathered is None:
            lines.append(_environment_line(f"run {index}", run.environment))
            differs = code_differs(run.environment, rendering_code())
            if differs:
                lines.append(f"run {index}: {differs}")
        else:  # a line per shard's machine (scanbench.gathered)
            lines.append(
                f"run {index}: gathered from {gathered.count} shards of run "
                f"{gathered.run_id} (split by {gathered.unit})"
            )
            environments = shard_environments(run)
            for shard in gathered.shards:
                lines.append(
                    _environment_line(
                        f"run {index}, shard {shard.index}/{gathered.count} "
                        f"({shard.cells} cells, {shard.file})",
                        environments.get(shard.index, {}),
                    )
                )
        for name, facts in run.scenarios.items():
            if facts.imports:
                where = ", ".join(f"{module} -> {path}" for module, path in facts.imports.items())
                lines.append(f"run {index}: scenario {name} imported {where}")
        at_once = max((r.extra.get("cells_at_once", 1) for r in run.records), default=1)
        if at_once > 1:
            lines.append(
                f"run {index}: {at_once} cells at a time: a cell imported, compiled and "
                "checked its first call while another cell's worker ran too, so its "
                "*compile* may be slower than alone; its sampling and counting ran with "
                "every other worker stopped (`scanbench run --no-overlap`: one at a time)"
            )
    return lines


def code_differs(env, own: tuple[str | None, str]) -> str | None:
    """The line that says a run was recorded by other code than the one rendering it:
    ``own`` is (the rendering checkout's commit or None, scanbench's version), compared
    with the run's ``scanbench_commit`` (scanbench's own checkout when it ran). Commits are
    compared where both are known (two "-dirty" ones match: uncommitted changes are not
    seen), else versions."""
    commit, version = own
    stored = env.get("scanbench_commit")
    recorded = (env.get("versions") or {}).get("scanbench")
    if isinstance(stored, str) and commit is not None:
        if stored == commit:
            return None
        return (
            f"recorded at commit {stored[:12]}, rendered by commit {commit[:12]}: the figures "
            "are the file's, the sentences follow the rules of the code rendering them, "
            "which may have changed since; run again to measure what that code measures"
        )
    if recorded and recorded != version:
        return (
            f"recorded by scanbench {recorded}, rendered by scanbench {version}: the "
            "sentences follow the rendering version's rules"
        )
    return None


def _environment_line(name: str, env) -> str:
    """Machine, device, versions, bandwidth, flags, commit, time of one environment."""
    versions = env.get("versions", {})
    bandwidth = (env.get("memory_bandwidth") or {}).get("bytes_per_s")
    return (
        f"{name}: {env.get('hostname', '?')}, {env.get('cpu_model', '?')} "
        f"({env.get('cpu_count', '?')} cores), {env.get('platform', '?')} "
        f"{env.get('device_kind', '?')} x{env.get('device_count', '?')}, "
        f"jax {versions.get('jax')}, jaxlib {versions.get('jaxlib')}, "
        f"numba {versions.get('numba')}, numpy {versions.get('numpy')}, "
        f"memory bandwidth {number(bandwidth / 1e9 if bandwidth else None)} GB/s, "
        f"XLA_FLAGS={env.get('xla_flags') or '(none)'}, commit {env.get('git_commit')}, "
        f"{env.get('timestamp', '?')}"
    )


COLUMN_HELP = (
    "Columns: *median* and *IQR* of the steady-state time of one call (after compile and "
    "warm-up; every call waits for its result; *≈*: measured on part of the work and "
    "scaled, see the note under the table); *n (±)*: timed calls and the half-width of the "
    "95% interval of the median, relative (sampling stops at ±1% or when the cell's time "
    "budget is spent; *n=1: no interval*: fewer than 6 samples, the fewest a 95% interval "
    "needs, e.g. one call exceeded the budget; ask for more with --min-samples); "
    "*(unchecked)*: timed without comparing its "
    "output with the reference; *compile*: untimed prepare (device placement + JIT/Numba "
    "compilation; beside another cell's worker when the environment says two cells at a "
    "time); *cores*: CPU time / wall time of the timed calls, the cores the backend really "
    "used (*(busy)*: measured while other programs held the cores; *(declared)*: stored "
    "before it was measured, the backend's declaration); *speedup vs B*: median of backend "
    "B / median, B being the scenario's sequential (Python loop) backend measured in the "
    "same run; *x fastest*: median / fastest median of the same run in the table (*tie*: "
    "the 95% bootstrap interval of that ratio includes 1, so the two are not told apart); "
    "*(disturbed)*: the machine was busy while the cell ran (more runnable tasks than "
    "cores, CPU steal, or a calibration probe that drifted) or its samples had a slow spell "
    "(a run of samples at least 1.25x the others' median), see the note under the table; "
    "*x BW bound*: median / (minimum bytes moved / measured memory bandwidth: one core's "
    "copy, or every core's for a cell that used more than one), 1.0 would be a solver "
    "running at memory speed; *x roofline*: core time per call (median x cores) / the "
    "roofline kernel's (its arithmetic alone, hand-written, the same work, same run: "
    "strategy *roofline*, shown as *(limit)*, never ranked nor diagnosed). Per call: "
    "*dispatches* (executable launches from the host, profiler trace); *kernels (trace)*: "
    "kernels executed on this device; *kernels (static)*: the same estimated from optimized "
    "HLO; *GPU launch equiv.*: loop body kernels x trip count, what a GPU launches op by "
    "op; *H2D*/*D2H*: transfers under jax.transfer_guard (bytes when logged); "
    "*dispatch/launch/transfer*: counts x unit costs measured in the same run (*transfer* "
    "priced by path: a range *a-b* when the path is unknown); *sync*: the share of the "
    "traced call the device sat idle inside the code's own waits (block_until_ready; *≤*: "
    "an upper bound, for results stored before it was measured); *recompile*: tracing and "
    "compilation inside the timed call, measured (jax.monitoring); *device*: the share of "
    "the traced call an XLA program was executing, measured from the trace (less the launch "
    "estimate); *host*: the rest of the median: host work no probe names (Python, "
    "NumPy/Numba/SciPy code); *(overlap N%)*: the parts exceed the median by N% (host and "
    "device work overlapped); *(unreliable)*: the traced call took over 2x the median or "
    "the parts exceed it, so its shares do not describe the median (see the note under the "
    "table). *memory (x min)*: the peak memory one warm call adds to the process (CPU: "
    "resident-set high-water mark; GPU: device memory; *≤*: bounded by an earlier peak) and "
    "(inputs + that peak) / (inputs + output), 1.0 for a call that allocates only its "
    "output; the memory table adds XLA's static plan (arguments + outputs + temporaries - "
    "aliased, of the largest executable) and its largest temporaries by instruction."
)


GLANCE_LEAD = 110  # characters of the slowest backend's lead finding "At a glance" shows


def slowest_lead(ok: pd.DataFrame) -> str:
    """The slowest backend of a table and its lead finding (the dominant cost and the
    change that removes it, evidence left out, shortened to `GLANCE_LEAD`): what a
    reader who stops at "At a glance" should change first; "-" when it has none."""
    slowest = ok.loc[ok["median_s"].idxmax()]
    findings = slowest.get("findings")
    if not isinstance(findings, list | tuple) or not findings:
        return "-"
    head = findings[0]
    cost = f"{head.cost} (estimate)" if head.estimate else str(head.cost)
    text = f"{slowest['backend']}: {cost}: "
    clauses = head.fix.split("; ")
    kept = next(
        (
            n
            for n in range(len(clauses), 0, -1)
            if len(text + "; ".join(clauses[:n])) <= GLANCE_LEAD
        ),
        0,
    )  # whole clauses of the fix where they fit, else its words
    if kept:
        return text + "; ".join(clauses[:kept])
    short = textwrap.shorten(text + head.fix, GLANCE_LEAD, placeholder=" ...")
    if short.count("`") % 2:  # a code span (a command) cut open: close it before the "..."
        closed = textwrap.shorten(text + head.fix, GLANCE_LEAD, placeholder="` ...")
        short = closed if closed.count("`") % 2 == 0 else short
    return short


def at_a_glance(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per table: the fastest backend (with those tied with it), its median and
    speedup, how many cells failed or were skipped, how many ran disturbed, and what to
    change in the slowest backend (`slowest_lead`)."""
    rows = []
    for title, group in tables(frame):
        ok = group[(group["status"] == "ok") & (group["strategy"] != "roofline")]
        ok = ok.dropna(subset=["median_s"])
        failed = int((group["status"] != "ok").sum())
        if ok.empty:
            rows.append(
                {"table": title, "fastest backend": "(none ran)", "failed / skipped": failed}
            )
            continue
        best = ok.loc[ok["median_s"].idxmin()]
        rows.append(
            {
                "table": title,
                "fastest backend": fastest_names(ok),
                "strategy": best["strategy"],
                "median": format_seconds(best["median_s"]),
                "speedup vs sequential baseline": (
                    "-" if pd.isna(best["speedup"]) else f"{best['speedup']:.2g}x"
                ),
                "failed / skipped": failed,
                "disturbed": int(ok["disturbed"].astype(bool).sum()),
                "what to change (slowest)": slowest_lead(ok),
            }
        )
    return pd.DataFrame(rows).astype(object).fillna("-") if rows else pd.DataFrame()


def run_time_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Where the run's own wall time went, summed over its cells, stage by stage (worker
    stages: loading the scenario, starting JAX, preparing and checking, sampling,
    counting; the runner's: process start-up and exit, interference probes), slowest
    stage first, with the cell that spent the most in it."""
    totals, worst = _stage_totals(frame)
    whole = sum(totals.values())
    rows = [
        {
            "stage": stage,
            "total": format_duration(seconds),
            "share": f"{seconds / whole:.0%}" if whole else "",
            "most in one cell": f"{format_seconds(worst[stage][0])} ({worst[stage][1]})",
        }
        for stage, seconds in sorted(totals.items(), key=lambda item: -item[1])
    ]
    return pd.DataFrame(rows, columns=["stage", "total", "share", "most in one cell"])


def _stage_totals(
    frame: pd.DataFrame,
) -> tuple[dict[str, float], dict[str, tuple[float, str]]]:
    """Per stage, its seconds summed over the cells, and the cell that spent the most in
    it (seconds, label)."""
    totals: dict[str, float] = {}
    worst: dict[str, tuple[float, str]] = {}
    for _, row in frame.iterrows():
        label = f"{row['scenario']}/{row['backend']}/{row['size']}"
        for stage, seconds in row["phases_s"].items():
            totals[stage] = totals.get(stage, 0.0) + seconds
            if seconds > worst.get(stage, (-1.0, ""))[0]:
                worst[stage] = (seconds, label)
    return totals, worst


def run_time_note(frame: pd.DataFrame) -> str:
    """What the shares of `run_time_table` are of: the cells' own times summed, which
    two cells at a time overlap, so a share is not one of the run's wall time."""
    whole = sum(_stage_totals(frame)[0].values())  # the table's shares are of this sum
    return (
        f"Each stage is summed over the cells' own times ({format_duration(whole)} in all). "
        "Cells that ran two at a time (see Environment) overlapped, so a share is of that "
        "sum, not of the run's wall time: sampling and counting stopped the other cell, "
        "compiling and checking ran beside it."
    )

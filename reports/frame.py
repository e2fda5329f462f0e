"""Stored runs as a pandas DataFrame: one row per record, with derived columns.

Derived columns (all from stored values; nothing is re-measured):
    backend, backend_name, params   the label shown (with --param values: "scanned-blocked
                                    [block=500]"; a sharded backend that split its work over
                                    the host's cores by default: "sharded (2 devices)"), the
                                    registered name, and the --param values (JSON)
    median_s, iqr_s, compile_s      steady-state median and IQR, prepare (compile) time
    compile_trace_s,                the prepare and first call's time by JAX's stages
    compile_lower_s,                (`scanbench.probes.compilations.CompileStages`):
    compile_xla_s, compile_rest_s   tracing, lowering, XLA's compile, and the rest
                                    (placement, host work); None where not recorded
    work_amount                     work[throughput unit] per call (e.g. systems)
    throughput                      work[throughput unit] / median (e.g. systems/s)
    gbps                            work["bytes"] / median / 1e9, when the work has bytes
    x_fastest                       median / fastest median of the same run and table
    fastest, tie                    the fastest cell of its table, and the cells whose 95%
                                    bootstrap interval of median / fastest median holds 1
    disturbed, disturbed_why        the machine was busy while the cell ran, or its samples
                                    had a slow spell (the reasons)
    set_aside, set_aside_why        how many earlier measurements of the cell were set aside
                                    as disturbed before this one, and why (their reasons)
    scale, scaled_from              measured on part of the work and scaled by ``scale``
                                    (1.0: measured whole); samples_s holds scaled samples
    rel_width, stop                 achieved 95% interval width of the median / median, and
                                    why sampling stopped (converged, budget, ...)
    warmup_skipped                  no separate warm-up call (the first call took over 1 s)
    speedup                         baseline median / median (same run and table); the
                                    baseline is the scenario's `sequential` backend
    x_bandwidth                     median / (work["bytes"] / memory bandwidth of the run: one
                                    core's copy, or every core's for a cell that used more
                                    than one)
    cores_declared                  what the backend declares (every core when parallel or
                                    sharded, else one): the pools' cores where the measured
                                    ones were taken on a busy machine
    cores, cores_measured,          the cores the timed calls used (CPU time / wall time,
    cores_contended                 `scanbench.probes.usage`), whether measured (else the
                                    backend's declaration: 1, or every core when parallel)
                                    and whether measured on a busy machine
    faults_per_call                 minor page faults of a timed call (fresh memory)
    diagnosis, findings             the dominant cost, its evidence and its fix, and the
                                    others' names (`scanbench.diagnosis`), for counted, timed
                                    cells; and every finding, the dominant first
    x_roofline                      core time per call / the roofline kernel's (strategy
                                    "roofline": the same work as hand-written arithmetic
                                    alone) in the same run and table: median x cores over
                                    its median x cores; roofline rows themselves are never
                                    fastest, tied or sped up, and are not diagnosed
    dispatches, executions          per call, from the profiler trace
    kernels_trace, kernels_static   kernels executed on this device (trace / static HLO)
    launch_equivalent               static: body kernels x trip count (GPU launches)
    h2d, h2d_bytes, h2d_unknown     host-to-device transfers per call (transfer guard)
    d2h, d2h_bytes, d2h_note        device-to-host per call ("zero-copy on CPU" on CPU)
    mem_peak, mem_exact             measured peak memory growth of one call over the state
                                    before it (bytes; mem_exact False: an upper bound)
    mem_minimum, x_minimum          inputs + output bytes; (inputs + mem_peak) / minimum
                                    (None below 1 MiB: the minimum says nothing there)
    mem_planned, mem_temp,          XLA's static plan of the largest executable (arguments +
    mem_temporaries                 outputs + temporaries - aliased; temporaries; the
                                    largest temporaries as (instruction, bytes))
    mem_output                      the call's output bytes (the memory probe)
    reliable, unreliable            whether the decomposition's traced shares hold, and why
                                    not (`scanbench.decomposition`)
    dispatch_pct, launch_pct,       the time decomposition (`scanbench.decomposition`):
    transfer_pct, compile_pct,      counts x unit costs; compile: measured recompilation;
    device_pct, host_pct,           device: measured from the trace; host: the rest;
    remainder_pct                   remainder = device + host (alone in older results)
    transfer_low_pct,               the range of transfer_pct when a transfer's path is
    transfer_high_pct               unknown (jitted-call arguments, host conversions)
    overlap_pct                     how far the parts exceed the median (host and device
                                    work overlapped), 0 otherwise
    archive_map                     the final archive a quality-diversity cell stored
                                    (`scanbench.ArchiveMap`), else None
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from scanbench.api import cache_suffix, param_suffix
from scanbench.archive_map import ArchiveMap
from scanbench.bounds import bound_for
from scanbench.counts import Counts
from scanbench.decomposition import PARTS, decomposition_of
from scanbench.diagnosis import (
    CORES_DIFFER,
    FASTER_BY,
    TIE_CONFIDENCE,
    Cores,
    Facts,
    Neighbour,
    cores_of,
    diagnose,
    facts_of,
    summary,
)
from scanbench.gap import explain
from scanbench.gathered import environment_of, kind_label, kinds, shard_of
from scanbench.invocation import NotebookCall
from scanbench.results import Run
from scanbench.statistics import bootstrap_medians, median_bound_indices, ratio_interval_of
from scanbench.trace_route import TraceRoute

GROUP = ["scenario", "size", "dtype", "device"]
NOT_JITTED = "python"  # the engine of a function that is not jitted (scanbench.notebook)
MIN_SAMPLES = 5  # fewer samples than this: no interval, flagged wherever a time is shown
# ratios only ever compare backends measured in one run, with the caches in the same state,
# and, in a run gathered from shards, by one machine (the shard; -1 in any other run)
SAME_RUN = ["run", *GROUP, "cache", "shard"]


def without_interval(samples: float, rel_width: float | None) -> bool:
    """A time flagged "n=N: no interval" wherever it is shown: fewer than `MIN_SAMPLES`
    samples, or no stored interval (``rel_width`` None or NaN: 6 samples at 95%)."""
    return samples < MIN_SAMPLES or rel_width is None or rel_width != rel_width


def _device_kind(device: dict, environment: dict) -> str:
    platform = device.get("platform") or environment.get("platform") or "?"
    kind = device.get("device_kind") or environment.get("device_kind") or "?"
    return f"{platform}:{kind}"


def _device_label(device: dict, environment: dict, requested: int | None) -> str:
    """``platform:kind``, with `` xN`` when the cell was asked to run on N > 1 devices
    (``--devices``): such cells form tables of their own."""
    count = device.get("cell_devices", 1) if requested is not None else 1
    return _device_kind(device, environment) + (f" x{count}" if count > 1 else "")


XLA_MARK = " +xla"  # ran with the XLA flags its backend declares (listed under the table)


def _backend_label(record) -> str:
    """The backend's name, its ``--param`` values (``scanned-blocked[block=500]``), and
    `` (N devices)`` for a sharded backend that split its work over the host's cores by
    default (it shares the table of the single-device backends)."""
    label = record.backend + param_suffix(dict(record.params)) + cache_suffix(record.cache)
    label += XLA_MARK if record.xla_flags and record.xla_flags_applied else ""
    count = dict(record.device).get("cell_devices", 1)
    if record.devices is None and count > 1:
        return f"{label} ({count} devices)"
    return label


def _count_columns(counts: Counts, decomposition: dict) -> dict:
    per_call = counts.per_call()
    row = {
        **{key: value for key, value in per_call.items() if key != "kernels"},
        "kernels_trace": per_call["kernels"],
        "d2h_note": counts.transfers.get("note", ""),
        "probe_errors": counts.error_text(),
    }
    if "compute_fraction" in decomposition:  # stored before the remainder was named so
        decomposition = {**decomposition, "remainder_fraction": decomposition["compute_fraction"]}
    for part in (*PARTS, "remainder", "transfer_low", "transfer_high", "overlap"):
        fraction = decomposition.get(f"{part}_fraction")
        if fraction is None and part == "compile" and "remainder_fraction" in decomposition:
            fraction = 0.0 if decomposition.get("compile_measured") else None
        row[f"{part}_pct"] = None if fraction is None else 100.0 * fraction
    row["overlap"] = bool(decomposition.get("overlap"))
    row["reliable"] = bool(decomposition.get("reliable", True))
    row["unreliable"] = decomposition.get("unreliable") or ""
    row["sync_bound"] = bool(decomposition.get("sync_bound"))
    row.update(_memory_columns(counts))
    linear = counts.linear
    model = linear.get("model") or {}
    row["linear_along"] = linear.get("along")
    row["linear_n"] = linear.get("n")
    row["linear_dispatches"] = model.get("trace.dispatches")
    row["linear_h2d"] = model.get("transfers.h2d")
    return row


# Below this, inputs + output say nothing about what a call must hold (the MPPI tuning
# inputs are a configuration and a seed: 56 bytes): no "x minimum" is shown.
MEANINGFUL_MINIMUM_BYTES = 2**20


def _memory_columns(counts: Counts) -> dict:
    """The memory of one call (`scanbench.probes.memory`), None where not measured."""
    memory = counts.memory
    measured = memory.get("measured") or {}
    peak, minimum = measured.get("bytes"), memory.get("minimum_bytes")
    inputs = memory.get("input_bytes")
    return {
        "mem_peak": peak,
        "mem_exact": measured.get("exact", True),
        "mem_method": measured.get("method"),
        "mem_note": measured.get("note") or counts.errors.get("memory") or "",
        "mem_minimum": minimum,
        "mem_planned": memory.get("planned_bytes"),
        "mem_temp": memory.get("temp_bytes"),
        "mem_output": memory.get("output_bytes"),
        "mem_temporaries": tuple(
            (t["instruction"], t["bytes"]) for t in memory.get("temporaries") or ()
        ),
        "x_minimum": (
            (inputs + peak) / minimum
            if None not in (peak, minimum, inputs) and minimum >= MEANINGFUL_MINIMUM_BYTES
            else None
        ),
    }


def _set_aside(interference: dict[str, Any]) -> dict[str, Any]:
    """The measurements of a cell set aside as disturbed before the one kept
    (`scanbench.execution.remeasure`; ``interference`` is the kept record's): how many,
    and what disturbed each."""
    aside = interference.get("set_aside") or ()
    why = [
        "; ".join((attempt.get("interference") or {}).get("reasons", ()))
        or attempt.get("error")
        or attempt.get("status", "")
        for attempt in aside
    ]
    return {"set_aside": len(aside), "set_aside_why": " | ".join(why)}


BUNDLED = "scanbench.scenarios."  # the sources of the bundled scenarios' modules


def trace_route(run: Run, record: Any) -> TraceRoute:
    """How the reader of a record's diagnosis gets a trace of it: a function measured in
    Python (`scanbench.compare`) by ``scanbench.profile``, a run's cell by ``scanbench
    profile`` of that cell (a bundled scenario by its name, another by its source)."""
    if isinstance(run.invocation.origin, NotebookCall):
        return TraceRoute.python(record.backend)
    facts = run.scenarios.get(record.scenario)
    source = facts.source if facts is not None and facts.source else record.scenario
    params = dict(record.params or {})
    # a bundled scenario by its catalogue name (its source is in scanbench.scenarios);
    # no scenario is loaded here
    bundled = source.startswith(BUNDLED)
    scenario = record.scenario if bundled else source
    return TraceRoute.command(scenario, record.backend, record.size, record.dtype, params)


def records_frame(runs: Sequence[Run]) -> pd.DataFrame:
    """One row per record of every run (ratios computed within each run)."""
    rows = []
    for run_index, run in enumerate(runs):
        facts = run.scenarios  # stored with the run: no scenario is loaded here
        units = {name: fact.throughput_unit for name, fact in facts.items()}
        baselines = {name: fact.baseline for name, fact in facts.items()}
        several_kinds = len(kinds(run)) > 1  # gathered from machines of different kinds
        for order, record in enumerate(run.records):
            env = dict(environment_of(run, record))  # its own machine's (scanbench.gathered)
            bandwidth = (env.get("memory_bandwidth") or {}).get("bytes_per_s")
            levels = env.get("memory_levels") or []
            device = _device_label(dict(record.device), env, record.devices)
            device += f" on {kind_label(env)}" if several_kinds else ""  # never compared
            stats = dict(record.stats)
            work = dict(record.work)
            sampling = dict(record.sampling)
            scaled = dict(sampling.get("scaled") or {})
            scale = float(scaled.get("factor", 1.0))
            unit = units.get(record.scenario)
            median = stats.get("median")
            cores = cores_of(record, env.get("cpu_count"))
            usage = dict(sampling.get("usage") or {})
            rows.append(
                {
                    "run": run_index,
                    "order": order,
                    "scenario": record.scenario,
                    "size": record.size,
                    "dtype": record.dtype,
                    "device": device,
                    "shard": -1 if shard_of(record) is None else shard_of(record),
                    "device_kind": _device_kind(dict(record.device), env),
                    "devices": dict(record.device).get("cell_devices", 1),
                    "processes": dict(record.device).get("processes", 1),
                    "host": env.get("hostname", "?"),
                    "jax": (env.get("versions") or {}).get("jax", "?"),
                    "size_params": json.dumps(dict(record.size_params), sort_keys=True),
                    "baseline": baselines.get(record.scenario),
                    "backend": _backend_label(record),
                    "backend_name": record.backend,
                    "params": json.dumps(dict(record.params), sort_keys=True),
                    "strategy": record.strategy,
                    "engine": record.engine,
                    "status": record.status,
                    "error": record.error or "",
                    "median_s": median,
                    "iqr_s": stats.get("iqr"),
                    "ci_low_s": stats.get("ci_low"),
                    "ci_high_s": stats.get("ci_high"),
                    "samples": stats.get("count"),
                    # a plain Python function (the notebook API) compiles nothing
                    "compile_s": None if record.engine == NOT_JITTED else record.prepare_s,
                    "checked": record.checked,
                    "parallel": record.parallel or record.strategy == "sharded",
                    "cache": record.cache,
                    "xla_flags": " ".join(record.xla_flags),
                    "xla_flags_applied": record.xla_flags_applied,
                    "first_call_s": record.first_call_s,
                    **_compile_stages(record),
                    "max_error": record.max_error,
                    "samples_s": tuple(value * scale for value in record.samples_s),
                    "spell": _spell(record.interference.get("slow_spell")),
                    "scale": scale,
                    "scaled_from": (
                        f"{scaled['measured']} of {scaled['full']} {scaled['along']}"
                        if scaled
                        else ""
                    ),
                    "rel_width": sampling.get("rel_width"),
                    "warmup_skipped": bool(sampling.get("warmup_skipped")),
                    "stop": sampling.get("stop", ""),
                    "phases_s": dict(record.extra.get("phases_s") or {}),
                    "archive_map": ArchiveMap.from_output(record.extra.get("output")),
                    "disturbed": record.disturbed,
                    "disturbed_why": "; ".join(record.interference.get("reasons", ())),
                    **_set_aside(dict(record.interference)),
                    "unit": unit,
                    "work_amount": work.get(unit),
                    "throughput": work.get(unit) / median if unit in work and median else None,
                    "gbps": work["bytes"] / median / 1e9 if "bytes" in work and median else None,
                    "cores": cores.count,
                    "cores_measured": cores.measured,
                    "cores_contended": cores.contended,
                    "cores_declared": _declared_cores(record, env.get("cpu_count")),
                    "faults_per_call": usage.get("faults_per_call"),
                    "waits_by_function": json.dumps(
                        dict(record.counts.conversions.get("waits_by_function") or {}),
                        sort_keys=True,
                    ),
                    "dispatch_functions": json.dumps(
                        dict(record.counts.trace.get("dispatches_by_function") or {}),
                        sort_keys=True,
                    ),
                    "loops": json.dumps(_loops(record.counts.static)),
                    **_bound(record, work, levels, bandwidth, cores),
                    **_count_columns(record.counts, decomposition_of(record, env)),
                    "_facts": facts_of(record, env, trace_route(run, record)),
                }
            )
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    median = pd.to_numeric(frame["median_s"], errors="coerce")
    roofline = frame["strategy"] == "roofline"  # a limit, not a rival: never ranked
    ok_median = median.where((frame["status"] == "ok") & ~roofline)
    same_run = [frame[key] for key in SAME_RUN]
    frame["x_fastest"] = median / ok_median.groupby(same_run, sort=False).transform("min")
    baseline = ok_median.where(frame["backend_name"] == frame["baseline"])
    frame["speedup"] = baseline.groupby(same_run, sort=False).transform("max") / median
    frame.loc[roofline, ["x_fastest", "speedup"]] = None
    frame["x_bandwidth"] = median / pd.to_numeric(frame["bound_s"], errors="coerce")
    core_time = median * frame["cores"]  # like with like: core time per call
    limit = core_time.where(roofline & (frame["status"] == "ok"))
    frame["x_roofline"] = core_time / limit.groupby(same_run, sort=False).transform("min")
    frame.loc[roofline, "x_roofline"] = median / median.where(roofline).groupby(
        same_run, sort=False
    ).transform("min")
    frame["clean_samples_s"] = [
        _clean_samples(samples, spell)
        for samples, spell in zip(frame["samples_s"], frame["spell"], strict=True)
    ]
    intervals = _Intervals(frame)
    frame["fastest"], frame["tie"] = _fastest_and_ties(frame, ok_median, intervals)
    limited = [
        _limited(facts, x_bw, x_roof, level, bandwidth)
        for facts, x_bw, x_roof, level, bandwidth in zip(
            frame["_facts"],
            frame["x_bandwidth"],
            frame["x_roofline"],
            frame["bound_level"],
            frame["bound_bytes_per_s"],
            strict=True,
        )
    ]
    faster = _faster_neighbours(frame, ok_median, intervals, limited)
    without_waits = _without_waits(frame, ok_median, intervals)
    frame["findings"] = [
        ()
        if facts is None
        else diagnose(dataclasses.replace(facts, faster=tuple(neighbours), without_waits=waits))
        for facts, neighbours, waits in zip(limited, faster, without_waits, strict=True)
    ]
    frame["diagnosis"] = [summary(findings) for findings in frame["findings"]]
    return frame.drop(columns="_facts")


# the counts a slower backend's diagnosis compares with a faster one's (frame columns)
COMPARED = {
    "dispatches": "dispatches",
    "kernels": "kernels_trace",
    "launch_equivalent": "launch_equivalent",
    "h2d": "h2d",
    "host_conversions": "host_conversions",
    "waits": "waits",
    "compiles": "compiles",
}


def _loops(static: Any) -> list:
    """The trip counts of a record's compiled loops, sorted (a program's shape that XLA's
    flags do not change)."""
    executables = (dict(static or {}).get("executables") or {}).values()
    return sorted(
        loop.get("trip_count") or 0 for info in executables for loop in info.get("loops") or ()
    )


def _differing_counts(frame: pd.DataFrame, index: Any, other: Any) -> dict:
    counts = {}
    for key, column in COMPARED.items():
        if column not in frame:
            continue
        mine, theirs = frame.at[index, column], frame.at[other, column]
        mine = None if pd.isna(mine) else float(mine)
        theirs = None if pd.isna(theirs) else float(theirs)
        if mine != theirs:
            counts[key] = (mine, theirs)
    return counts


def _cores(frame: pd.DataFrame, index: Any) -> Cores:
    return Cores(
        float(frame.at[index, "cores"]),
        bool(frame.at[index, "cores_measured"]),
        bool(frame.at[index, "cores_contended"]),
    )


PROGRAM = ("strategy", "engine", "devices", "dispatch_functions", "loops")


def _program(frame: pd.DataFrame, index: Any) -> tuple | None:
    """What makes a row the same program as another with other XLA flags (`_siblings`):
    the same strategy, engine and devices, the same functions dispatched as often and
    the same loops. None for a row that dispatched nothing; a missing value (NaN) equals
    nothing, as ``==`` says."""
    if frame.at[index, "dispatch_functions"] == "{}":
        return None
    values = (frame.at[index, key] for key in PROGRAM)
    return tuple(value if value == value else object() for value in values)


def _same_program(frame: pd.DataFrame, index: Any, other: Any) -> bool:
    """The same program with other XLA flags (`_program`)."""
    mine = _program(frame, index)
    return (
        mine is not None
        and mine == _program(frame, other)
        and frame.at[index, "xla_flags"] != frame.at[other, "xla_flags"]
    )


def _siblings(frame: pd.DataFrame, rows: Sequence[Any]) -> dict[Any, list[Any]]:
    """Per row, the others of ``rows`` (in their order) that are the same program with
    other XLA flags. Read once per row and grouped, so a table of N rows costs N reads,
    not N^2."""
    programs = {index: _program(frame, index) for index in rows}
    flags = {index: frame.at[index, "xla_flags"] for index in rows}
    by_program: dict[tuple, list[Any]] = {}
    for index in rows:
        if programs[index] is not None:
            by_program.setdefault(programs[index], []).append(index)
    return {
        index: [
            other
            for other in by_program.get(programs[index], [])
            if other != index and flags[index] != flags[other]
        ]
        for index in rows
    }


class _Intervals:
    """The `TIE_CONFIDENCE` bootstrap interval of median(row) / median(other) per pair of
    rows, computed once (ties, neighbours and waits ask for the same pairs). With fewer
    samples on a side than an exact interval of a median needs at that confidence (6 at
    95%), a bootstrap undercovers (3 samples gave "31.81-37.39x" where the interleaved
    switch measured 22.22-27.32x: performance log, 2026-11-26), so the pair gets the
    ratio of the samples' ranges instead (`ranged`): every sample of one against every
    sample of the other."""

    def __init__(self, frame: pd.DataFrame, column: str = "samples_s") -> None:
        self.frame = frame
        self.column = column  # "clean_samples_s": each cell's flagged slow spell left out
        self.spell_free: _Intervals | None = None  # the same pairs on "clean_samples_s"
        self.known: dict[tuple[Any, Any], tuple[float, float, float] | None] = {}
        self.by_range: set[tuple[Any, Any]] = set()
        self.medians: dict[Any, np.ndarray] = {}  # per row, drawn once (`bootstrap_medians`)

    def _medians(self, index: Any, samples: Sequence[float]) -> np.ndarray:
        if index not in self.medians:  # seeded by the row's place: the same in every report
            seed = self.frame.index.get_loc(index)
            self.medians[index] = bootstrap_medians(samples, TIE_CONFIDENCE, seed=seed)
        return self.medians[index]

    def __call__(self, index: Any, other: Any) -> tuple[float, float, float] | None:
        """(ratio, low, high), or None with fewer than 2 samples on a side."""
        if (index, other) not in self.known:
            mine = self.frame.at[index, self.column]
            theirs = self.frame.at[other, self.column]
            if len(mine) < 2 or len(theirs) < 2:
                self.known[(index, other)] = None
                return None
            ratio = float(np.median(mine) / np.median(theirs))
            if not (_exact(len(mine)) and _exact(len(theirs))):
                low, high = min(mine) / max(theirs), max(mine) / min(theirs)
                self.known[(index, other)] = (ratio, low, high)
                self.by_range.add((index, other))
            else:
                self.known[(index, other)] = ratio_interval_of(
                    ratio,
                    self._medians(index, mine),
                    self._medians(other, theirs),
                    TIE_CONFIDENCE,
                )
        return self.known[(index, other)]

    def clean(self, index: Any, other: Any) -> tuple[float, float, float] | None:
        """The pair's interval on the samples outside each cell's flagged slow spell."""
        if self.spell_free is None:
            self.spell_free = _Intervals(self.frame, "clean_samples_s")
        return self.spell_free(index, other)

    def ranged(self, index: Any, other: Any) -> bool:
        """Whether the pair's interval is the ratio of the samples' ranges (see above)."""
        return (index, other) in self.by_range


def _exact(count: int) -> bool:
    """Whether ``count`` samples give an exact `TIE_CONFIDENCE` interval of their median."""
    low, high = median_bound_indices(count, TIE_CONFIDENCE)
    return low >= 0 and high < count


def _neighbour(
    frame: pd.DataFrame,
    index: Any,
    other: Any,
    intervals: _Intervals,
    limited: Sequence[Facts | None],
) -> Neighbour | None:
    """``other`` as a faster neighbour of ``index``: at least `FASTER_BY` x faster by the
    medians and the interval of the ratio of their samples excluding a tie; else None."""
    interval = intervals(index, other)
    if interval is None:
        return None
    ratio, low, high = interval
    if ratio < FASTER_BY or not low > 1.0:
        return None
    spells = _spell_caveats(frame, index, other, intervals)
    if spells is None:
        return None  # without the slow spell's samples the test does not pass
    mine = limited[frame.index.get_loc(index)]
    theirs = limited[frame.index.get_loc(other)]
    gap = None if mine is None or theirs is None else explain(mine, theirs, CORES_DIFFER)
    return Neighbour(
        str(frame.at[other, "backend"]),
        ratio,
        low,
        high,
        _differing_counts(frame, index, other),
        (_cores(frame, index), _cores(frame, other)),
        _same_program(frame, index, other),
        _caveats(frame, index, other) + spells,
        intervals.ranged(index, other),
        gap,
    )


def _spell(stored: Any) -> tuple[int, int, float] | None:
    """A record's flagged slow spell: (first, last, factor), samples counted from 0."""
    if not isinstance(stored, dict):
        return None
    return int(stored["first"]), int(stored["last"]), float(stored["factor"])


def _clean_samples(samples: Sequence[float], spell: tuple[int, int, float] | None) -> tuple:
    """The samples without the flagged slow spell (all of them when it has none)."""
    if spell is None:
        return tuple(samples)
    first, last, _ = spell
    return tuple(samples[:first]) + tuple(samples[last + 1 :])


def _spell_caveats(
    frame: pd.DataFrame, index: Any, other: Any, intervals: _Intervals
) -> tuple[str, ...] | None:
    """Where either cell had a flagged slow spell, the neighbour test again on the
    samples outside it (`FASTER_BY` x by the medians, the interval excluding a tie):
    None when it fails there (the comparison is not made), else the caveat that gives
    the ratio outside the spell; () when neither cell had one."""
    spells = [frame.at[row, "spell"] for row in (index, other)]
    if all(spell is None for spell in spells):
        return ()
    clean = intervals.clean(index, other)
    if clean is None:
        return None
    ratio, low, high = clean
    if ratio < FASTER_BY or not low > 1.0:
        return None
    whose = [
        f"{who}'s slow spell ({spell[2]:.2f}x over samples {spell[0] + 1}-{spell[1] + 1})"
        for who, spell in (("this backend", spells[0]), ("its cell", spells[1]))
        if spell is not None
    ]
    return (f"outside {' and '.join(whose)}: {ratio:.2f}x ({low:.2f}-{high:.2f}x)",)


def _caveats(frame: pd.DataFrame, index: Any, other: Any) -> tuple[str, ...]:
    """Why a ratio of two cells' medians may not hold when the switch is made: a cell
    measured on a disturbed machine, or on part of the work and scaled (the diagnosis
    score measured both miss their predicted ratio: performance log, 2026-11-26)."""
    said = []
    for who, row in (("this backend's cell", index), ("its cell", other)):
        if frame.at[row, "disturbed"]:
            said.append(f"{who} was disturbed")
        if frame.at[row, "scaled_from"]:
            said.append(f"{who} was measured on {frame.at[row, 'scaled_from']} and scaled")
    return tuple(said)


NEIGHBOURS = 2  # faster backends named per cell: the first leads, the other is an "also"


def _faster_neighbours(
    frame: pd.DataFrame,
    ok_median: pd.Series,
    intervals: _Intervals,
    limited: Sequence[Facts | None],
) -> list:
    """Per row, the faster backends of its table (same run) to name, in order (see
    `scanbench.diagnosis`): the same program with other XLA flags; the fastest on at
    most as many cores (always named); else the fastest on more cores. Each is at least
    `FASTER_BY` x faster and the interval of the ratio excludes a tie."""
    found: list = [()] * len(frame)
    for _, group in ok_median.groupby([frame[key] for key in SAME_RUN], sort=False):
        valid = group.dropna().sort_values()
        same_program = _siblings(frame, list(valid.index))
        cores = {index: pool_cores(frame.loc[index]) for index in valid.index}
        for index in valid.index:
            candidates = [other for other in valid.index if other != index]
            siblings = same_program[index]
            # on at most as many cores (`CORES_DIFFER`): a boundary never turns on cores
            # measured on a busy machine (`pool_cores`)
            fewer = [o for o in candidates if cores[o] < cores[index] + CORES_DIFFER]
            fewer_set = set(fewer)
            more = [o for o in candidates if o not in fewer_set]
            chosen: list[Neighbour] = []
            named: list[Any] = []
            for pool in (siblings, fewer, more):
                if pool is more and named:  # on more cores: named when faster still
                    pool = [o for o in more if valid[o] < min(valid[n] for n in named)]
                for other in pool:  # fastest first
                    if other in named:
                        continue
                    neighbour = _neighbour(frame, index, other, intervals, limited)
                    if neighbour is not None:
                        chosen.append(neighbour)
                        named.append(other)
                        break
                    if valid[index] < FASTER_BY * valid[other]:
                        break  # the others of this pool are slower still
            position = frame.index.get_loc(index)
            found[position] = tuple(chosen[:NEIGHBOURS])
    return found


STAGE_COLUMNS = {
    "compile_trace_s": "trace_s",
    "compile_lower_s": "lower_s",
    "compile_xla_s": "compile_s",
    "compile_rest_s": "rest_s",
}


def _compile_stages(record: Any) -> dict[str, float | None]:
    """The time to a first result (prepare and the first call together) by JAX's
    stages, as the worker recorded them (``extra.compile_stages``), or None each."""
    phases = (record.extra or {}).get("compile_stages") or {}
    if not phases:
        return dict.fromkeys(STAGE_COLUMNS)
    return {
        column: sum(float((phase or {}).get(key) or 0.0) for phase in phases.values())
        for column, key in STAGE_COLUMNS.items()
    }


def _declared_cores(record: Any, cpu_count: int | None) -> float:
    """What a backend declares: every core when parallel or sharded, else one."""
    parallel = record.parallel or record.strategy == "sharded"
    return float(cpu_count or 1) if parallel else 1.0


def pool_cores(row: Mapping[str, Any]) -> float:
    """The cores a row is pooled by: measured, or declared where the measurement was
    made on a busy machine (other programs took the cores it would have used)."""
    if bool(row.get("cores_contended")) and row.get("cores_declared") is not None:
        return float(row["cores_declared"])
    return float(row["cores"])


def _without_waits(frame: pd.DataFrame, ok_median: pd.Series, intervals: _Intervals) -> list:
    """Per row with waits, the same loop without them in its table (the same functions
    dispatched as often, the same kernels, no waits), compared on their samples."""
    found: list = [None] * len(frame)
    for _, group in ok_median.groupby([frame[key] for key in SAME_RUN], sort=False):
        valid = group.dropna()
        for index in valid.index:
            waits = frame.at[index, "waits"] if "waits" in frame else None
            if waits is None or pd.isna(waits) or waits < 2:
                continue
            for other in valid.index:
                same = all(
                    frame.at[index, key] == frame.at[other, key]
                    for key in ("dispatch_functions", "kernels_trace", "engine")
                )
                theirs = frame.at[other, "waits"]
                if other == index or not same or pd.isna(theirs) or theirs != 0:
                    continue
                interval = intervals(index, other)
                if interval is None:
                    continue
                ratio, low, high = interval
                position = frame.index.get_loc(index)
                found[position] = Neighbour(
                    str(frame.at[other, "backend"]), ratio, low, high,
                    cores=(_cores(frame, index), _cores(frame, other)),
                    ranged=intervals.ranged(index, other),
                )  # fmt: skip
                break
    return found


def _bound(
    record: Any, work: dict, levels: list, bandwidth: float | None, cores: Cores
) -> dict[str, Any]:
    """The memory bound of a cell: its bytes at the copy bandwidth of the level its
    working set fits in (the inputs and output it must hold, else its bytes), with every
    core's figure for a cell that used more than one core (measured; declared for results
    stored before: `scanbench.bounds.bound_for`); runs stored before the levels were
    measured: the DRAM copy of one thread."""
    if "bytes" not in work:
        return {"bound_s": None, "bound_level": None, "bound_bytes_per_s": None}
    minimum = (record.counts.section("memory") or {}).get("minimum_bytes")
    parallel = cores.count >= 1.5
    found = bound_for(levels, minimum or work["bytes"], parallel)
    if found is None:
        return {
            "bound_s": work["bytes"] / bandwidth if bandwidth else None,
            "bound_level": None,
            "bound_bytes_per_s": bandwidth,
        }
    level, bytes_per_s = found
    return {
        "bound_s": work["bytes"] / bytes_per_s,
        "bound_level": f"{level}, all cores" if parallel else level,
        "bound_bytes_per_s": bytes_per_s,
    }


def _limited(facts: Facts | None, x_bandwidth, x_roofline, level, bandwidth) -> Facts | None:
    """A cell's facts with the limits of its table row (what `diagnose` and the gap to a
    neighbour read); None for a cell that was not counted and timed."""
    if facts is None:
        return None
    return dataclasses.replace(
        facts,
        x_bandwidth=None if pd.isna(x_bandwidth) else float(x_bandwidth),
        x_roofline=None if pd.isna(x_roofline) else float(x_roofline),
        bound_level=None if level is None or pd.isna(level) else str(level),
        bound_bytes_per_s=None if bandwidth is None or pd.isna(bandwidth) else float(bandwidth),
    )


def _fastest_and_ties(
    frame: pd.DataFrame, ok_median: pd.Series, intervals: _Intervals
) -> tuple[pd.Series, pd.Series]:
    """Per table of one run: the fastest cell, and the cells tied with it (the
    `TIE_CONFIDENCE` bootstrap interval of median(cell) / median(fastest) includes 1)."""
    fastest = pd.Series(False, index=frame.index)
    tie = pd.Series(False, index=frame.index)
    for _, index in (
        ok_median.dropna().groupby([frame[key] for key in SAME_RUN], sort=False).groups.items()
    ):
        best = ok_median.loc[index].idxmin()
        fastest[best] = True
        for other in index:
            interval = intervals(other, best) if other != best else None
            if interval is None:
                continue
            tie[other] = bool(interval[1] <= 1.0)
    return fastest, tie

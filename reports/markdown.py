"""Markdown tables of stored runs (for terminals, CI summaries and PR comments)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from harness.store import Run
from reports.frame import GROUP, records_frame


def format_seconds(value: float | None) -> str:
    """A duration with 3 significant digits in s, ms or us."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if value == 0:
        return "0"
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value * 1e9:.3g} ns"


def _number(value: float | None) -> str:
    """3 significant digits with an SI suffix: 0.512, 42.1, 250 k, 1.32 M."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    for scale, suffix in ((1e12, " T"), (1e9, " G"), (1e6, " M"), (1e3, " k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def _environment_block(runs: Sequence[Run]) -> list[str]:
    lines = []
    for index, run in enumerate(runs):
        env = run.environment
        versions = env.get("versions", {})
        bandwidth = (env.get("memory_bandwidth") or {}).get("bytes_per_s")
        lines.append(
            f"- run {index}: {env.get('hostname', '?')}, {env.get('cpu_model', '?')} "
            f"({env.get('cpu_count', '?')} cores), {env.get('platform', '?')} "
            f"{env.get('device_kind', '?')} x{env.get('device_count', '?')}, "
            f"jax {versions.get('jax')}, jaxlib {versions.get('jaxlib')}, "
            f"numba {versions.get('numba')}, numpy {versions.get('numpy')}, "
            f"memory bandwidth {_number(bandwidth / 1e9 if bandwidth else None)} GB/s, "
            f"XLA_FLAGS={env.get('xla_flags') or '(none)'}, commit {env.get('git_commit')}, "
            f"{env.get('timestamp', '?')}"
        )
    return lines


def render(runs: Sequence[Run]) -> str:
    """Per scenario, size, dtype and device: one table of the backends that ran, then the
    failed and skipped cells with their errors, then the environment of each run."""
    units: dict[str, str] = {}
    for run in runs:
        units.update(run.invocation.get("throughput_units", {}))
    frame = records_frame(runs, units)
    out = ["# scanbench results", ""]
    if frame.empty:
        return "\n".join([*out, "No records.", ""])
    for key, group in frame.groupby(GROUP, sort=False):
        scenario, size, dtype, device = key
        group = group.sort_values(["run", "order"])
        out.append(f"## {scenario} / {size} / {dtype} / {device}")
        out.append("")
        ok = group[group["status"] == "ok"]
        if not ok.empty:
            unit = ok["unit"].iloc[0] or "calls"
            table = pd.DataFrame(
                {
                    "backend": ok["backend"],
                    "strategy": ok["strategy"],
                    "median": ok["median_s"].map(format_seconds),
                    "IQR": ok["iqr_s"].map(format_seconds),
                    "compile": ok["compile_s"].map(format_seconds),
                    f"{unit}/s": ok["throughput"].map(_number),
                    "GB/s": ok["gbps"].map(_number),
                    "x fastest": ok["x_fastest"].map(lambda v: f"{v:.2f}"),
                    "x BW bound": ok["x_bandwidth"].map(_number),
                }
            )
            out.append(table.to_markdown(index=False, disable_numparse=True))
            out.append("")
        bad = group[group["status"] != "ok"]
        for row in bad.itertuples():
            first_line = row.error.splitlines()[0] if row.error else ""
            out.append(f"- **{row.backend}** {row.status}: {first_line}")
        if not bad.empty:
            out.append("")
    out.append("## Environment")
    out.append("")
    out.extend(_environment_block(runs))
    out.append("")
    out.append(COLUMN_HELP)
    return "\n".join(out)


COLUMN_HELP = (
    "Columns: *median* and *IQR* of the steady-state time of one call (after compile and "
    "warm-up; every call waits for its result); *compile*: untimed prepare (device "
    "placement + JIT/Numba compilation); *x fastest*: median / fastest median in the table; "
    "*x BW bound*: median / (minimum bytes moved / measured memory bandwidth), 1.0 would be "
    "a solver running at memory speed."
)

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


def _count(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _transfers(count, nbytes, unknown) -> str:
    if count is None or (isinstance(count, float) and math.isnan(count)):
        return "-"
    text = _count(count)
    if count and unknown == count:
        text += " (size not logged)"
    elif count:
        text += f" ({_number(nbytes)}B"
        text += f" + {_count(unknown)} of unknown size)" if unknown else ")"
    return text


def _pct(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.0f}%"


def _counts_table(ok: pd.DataFrame) -> pd.DataFrame:
    d2h = [
        row.d2h_note if row.d2h_note and pd.isna(row.d2h) else _transfers(row.d2h, row.d2h_bytes, 0)
        for row in ok.itertuples()
    ]
    return pd.DataFrame(
        {
            "backend": ok["backend"],
            "dispatches": ok["dispatches"].map(_count),
            "kernels (trace)": ok["kernels_trace"].map(_count),
            "kernels (static)": ok["kernels_static"].map(_count),
            "GPU launch equiv.": ok["launch_equivalent"].map(_count),
            "H2D": [_transfers(r.h2d, r.h2d_bytes, r.h2d_unknown) for r in ok.itertuples()],
            "D2H": d2h,
            "dispatch": ok["dispatch_pct"].map(_pct),
            "launch": ok["launch_pct"].map(_pct),
            "transfer": ok["transfer_pct"].map(_pct),
            "compute": [
                _pct(r.compute_pct) + (" (overlap)" if r.overlap else "") for r in ok.itertuples()
            ],
        }
    )


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
            if ok["dispatches"].notna().any():
                out.append("Where the time goes (per call):")
                out.append("")
                out.append(_counts_table(ok).to_markdown(index=False, disable_numparse=True))
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
    "a solver running at memory speed. Per call: *dispatches* (executable launches from the "
    "host, profiler trace); *kernels (trace)*: kernels executed on this device; *kernels "
    "(static)*: the same estimated from optimized HLO; *GPU launch equiv.*: loop body "
    "kernels x trip count, what a GPU launches op by op; *H2D*/*D2H*: transfers under "
    "jax.transfer_guard (bytes when logged); *dispatch/launch/transfer/compute*: counts x "
    "unit costs measured in the same run, compute = the rest of the median."
)

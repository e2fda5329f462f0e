"""Scaling over devices: the same backend, size and run at several device counts.

Rows of `scanbench.reports.frame.records_frame` whose run measured one backend at two or more
device counts (``scanbench run --devices 1,2,4,8``). Efficiency = throughput at N devices
/ (N x throughput at 1 device), both from the same run: 1.0 is perfect scaling.
"""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd

from .tables import format_seconds, number

KEYS = ["run", "scenario", "size", "dtype", "device_kind", "backend"]


def scaling_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """ok rows of backends measured at >= 2 device counts in one run, with speedup and
    efficiency against the same backend on 1 device (None when 1 was not measured)."""
    if frame.empty:
        return frame
    ok = frame[frame["status"] == "ok"].dropna(subset=["median_s"])
    counts = ok.groupby(KEYS)["devices"].transform("nunique")
    rows = ok[counts >= 2].sort_values([*KEYS, "devices"]).copy()
    if rows.empty:
        return rows
    single = rows["median_s"].where(rows["devices"] == 1)
    single = single.groupby([rows[key] for key in KEYS]).transform("max")
    rows["scaling_speedup"] = single / rows["median_s"]
    rows["efficiency"] = rows["scaling_speedup"] / rows["devices"]
    return rows


def scaling_tables(frame: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame, pd.DataFrame]]:
    """(title, rows, formatted table) per run, scenario, size, dtype and device kind."""
    rows = scaling_rows(frame)
    if rows.empty:
        return
    for key, group in rows.groupby(KEYS[:-1], sort=False):
        run, scenario, size, dtype, kind = key
        unit = group["unit"].iloc[0] or "calls"
        table = pd.DataFrame(
            {
                "backend": group["backend"],
                "devices": group["devices"].astype(int).astype(str),
                "processes": group["processes"].astype(int).astype(str),
                "median": group["median_s"].map(format_seconds),
                f"{unit}/s": group["throughput"].map(number),
                "speedup vs 1 device": group["scaling_speedup"].map(
                    lambda v: "-" if pd.isna(v) else f"{v:.2f}"
                ),
                "efficiency": group["efficiency"].map(lambda v: "-" if pd.isna(v) else f"{v:.0%}"),
            }
        )
        yield f"{scenario} / {size} / {dtype} / {kind} (run {run})", group, table

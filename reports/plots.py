"""matplotlib figures of stored runs; each returns a Figure plus a caption that says what to see.

Figures are built with `matplotlib.figure.Figure` (no pyplot, no global state) from rows of
`scanbench.reports.frame.records_frame`. Legends sit outside the axes so they never cover data.
A figure earns its place: one size is drawn as one bar per backend, named on its axis (a
line needs two sizes; a column of dots keyed by a legend of every backend shows nothing a
bar does not show better), and sizes are drawn as lines only when there are two or more.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from .tables import format_seconds, number

STRATEGY_COLORS = {
    "sequential": "#d62728",
    "vmapped": "#1f77b4",
    "scanned": "#2ca02c",
    "numba": "#9467bd",
    "library": "#7f7f7f",
    "sharded": "#ff7f0e",
}
PARTS = (  # decomposition part, column, colour
    ("dispatch", "dispatch_pct", "#d62728"),
    ("kernel launch", "launch_pct", "#ff7f0e"),
    ("transfer", "transfer_pct", "#9467bd"),
    ("waits", "sync_pct", "#17becf"),
    ("recompilation", "compile_pct", "#8c564b"),
    ("device (measured)", "device_pct", "#2ca02c"),
    ("host: Python, native code (the rest)", "host_pct", "#bcbd22"),
    ("device + host (not split: older results)", "unsplit_pct", "#98df8a"),
)
OVERHEADS = PARTS[:5]


@dataclasses.dataclass(frozen=True)
class Plot:
    """A rendered figure: what it shows (title), what to see (caption), the image."""

    title: str
    caption: str
    figure: Figure

    def data_uri(self) -> str:
        """The figure as an SVG data URI (self-contained: no files, no network)."""
        buffer = io.BytesIO()
        self.figure.savefig(buffer, format="svg", bbox_inches="tight")
        return "data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue()).decode()


def _color(strategy: str) -> str:
    return STRATEGY_COLORS.get(strategy, "#17becf")


def _bar_figure(rows: int) -> tuple[Figure, object]:
    figure = Figure(figsize=(8.0, 0.9 + 0.32 * rows), layout="constrained")
    return figure, figure.add_subplot()


def _strategy_legend(axes, strategies) -> None:
    handles = [Patch(color=_color(s), label=s) for s in dict.fromkeys(strategies)]
    axes.legend(handles=handles, title="strategy", loc="upper left", bbox_to_anchor=(1.01, 1))


def _log_axis(axis, formatter) -> None:
    """Log ticks at 1, 2 and 5 per decade, labelled with ``formatter`` (no crowded minors)."""
    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda value, _: formatter(value)))


MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINESTYLES = ("-", "--", ":", "-.")


def _lines_vs_size(rows: pd.DataFrame, column: str, ylabel: str, formatter) -> Figure:
    """``column`` against the amount of work, one line per backend (log-log), one panel per
    device side by side (shared y axis)."""
    unit = rows["unit"].iloc[0]
    devices = list(dict.fromkeys(rows["device"]))
    figure = Figure(figsize=(3.0 + 4.0 * len(devices), 4.5), layout="constrained")
    panels = figure.subplots(1, len(devices), sharey=True, squeeze=False)[0]
    style = {}  # backend -> (colour by strategy, marker and line style within it)
    for backend, strategy in rows[["backend", "strategy"]].drop_duplicates("backend").values:
        same = sum(s == strategy for _, s in style.values())
        style[backend] = (_color(strategy), same), strategy
    sizes = rows.drop_duplicates("size").sort_values("work_amount")
    for axes, device in zip(panels, devices, strict=True):
        on_device = rows[rows["device"] == device]
        for backend, line in on_device.groupby("backend", sort=False):
            (color, index), _ = style[backend]
            line = line.sort_values("work_amount")
            axes.plot(
                line["work_amount"],
                line[column],
                color=color,
                marker=MARKERS[index % len(MARKERS)],
                linestyle=LINESTYLES[index % len(LINESTYLES)] if len(line) > 1 else "none",
                alpha=0.85,
                label=backend,
            )
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xticks(sizes["work_amount"])
        axes.set_xticklabels([f"{r.size}\n{r.work_amount:,.0f}" for r in sizes.itertuples()])
        axes.xaxis.set_minor_locator(NullLocator())
        _log_axis(axes.yaxis, formatter)
        axes.margins(x=0.1)
        axes.set_xlabel(f"{unit} per call (size name above)")
        axes.set_title(device, fontsize="medium")
        axes.grid(True, which="major", alpha=0.3)
    panels[0].set_ylabel(ylabel)
    handles = {}  # one legend entry per backend over all panels
    for axes in panels:
        for handle, label in zip(*axes.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    panels[-1].legend(
        handles.values(),
        handles.keys(),
        loc="upper left",
        bbox_to_anchor=(1.02, 1),
        fontsize="small",
        title="backend",
    )
    return figure


def memory_vs_size(rows: pd.DataFrame, title: str) -> Plot | None:
    """Measured peak memory growth per call against the amount of work (log-log), beside
    `time_vs_size`; None when no cell has a measured peak."""
    rows = rows[pd.to_numeric(rows["mem_peak"], errors="coerce") > 0]
    rows = rows.dropna(subset=["work_amount"])
    if rows.empty:
        return None
    if rows["size"].nunique() == 1:  # one bar per backend: there is no size axis to draw
        return _bars_one_size(
            rows.sort_values("mem_peak"),
            "mem_peak",
            "peak memory growth per call (shorter holds less)",
            lambda v: number(v) + "B",
            f"Memory per call: {title} / {rows['size'].iloc[0]}",
            "Shorter holds less",
        )
    figure = _lines_vs_size(
        rows, "mem_peak", "peak memory growth per call (log scale)", lambda v: number(v) + "B"
    )
    largest = rows.sort_values("work_amount").iloc[-1]["size"]
    at_largest = rows[rows["size"] == largest].sort_values("mem_peak")
    least, most = at_largest.iloc[0], at_largest.iloc[-1]
    caption = (
        f"Lower holds less. At the largest size ({largest}) {least['backend']} grows the "
        f"process by {number(least['mem_peak'])}B per call and {most['backend']} by "
        f"{number(most['mem_peak'])}B (inputs excluded: they exist before the call; "
        "measured as the resident-set high-water mark on CPU, device memory on GPU)."
    )
    return Plot(f"Memory vs size: {title}", caption, figure)


def time_vs_size(rows: pd.DataFrame, title: str) -> Plot | None:
    """Median time per call against the amount of work, one line per backend (log-log),
    one panel per device side by side (shared time axis).

    ``rows``: the ok cells of one scenario and dtype (any sizes and devices, one run each).
    None with fewer than two sizes: a single size is drawn per table, one bar per backend
    (`time_bars`, or `speedup_bars` against the baseline).
    """
    rows = rows.dropna(subset=["median_s", "work_amount"])
    sizes = rows.drop_duplicates("size").sort_values("work_amount")
    if len(sizes) < 2:  # one size: each table draws its backends as bars (time_bars)
        return None
    devices = list(dict.fromkeys(rows["device"]))
    figure = _lines_vs_size(rows, "median_s", "median time per call (log scale)", format_seconds)
    largest = sizes.iloc[-1]["size"]
    best = rows[rows["size"] == largest].sort_values("median_s").iloc[0]
    caption = (
        f"Lower is faster. At the largest size ({largest}) {best['backend']} is fastest "
        f"({format_seconds(best['median_s'])}"
        + (f", on {best['device']})." if len(devices) > 1 else ").")
    )
    caption += (
        " Slope 1 means time grows with the work; a flatter line at small sizes is a "
        "fixed per-call cost (dispatch, launches) that the work does not amortize yet."
    )
    return Plot(f"Time vs size: {title}", caption, figure)


def _bars_one_size(
    rows: pd.DataFrame, column: str, xlabel: str, formatter, title: str, lead: str
) -> Plot:
    """One horizontal bar per backend, named on the axis and coloured by strategy, its value
    at its end; one panel per device. ``rows``: the cells of one size. The axis is linear
    from 0, so that a bar twice as long is twice the value (a log axis would draw lengths
    from an arbitrary edge)."""
    devices = list(dict.fromkeys(rows["device"]))
    longest = max(len(dict.fromkeys(rows.loc[rows["device"] == d, "backend"])) for d in devices)
    figure = Figure(figsize=(8.0, 0.9 + 0.32 * longest * len(devices)), layout="constrained")
    panels = figure.subplots(len(devices), 1, sharex=True, squeeze=False)[:, 0]
    for axes, device in zip(panels, devices, strict=True):
        on_device = rows[rows["device"] == device]
        labels = _labels(on_device)
        positions = list(range(len(on_device)))
        values = on_device[column].astype(float)
        axes.barh(positions, values, color=[_color(s) for s in on_device["strategy"]])
        axes.set_yticks(positions, labels)
        axes.invert_yaxis()
        axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: formatter(value)))
        for position, value in zip(positions, values, strict=True):
            axes.annotate(
                formatter(value),
                (value, position),
                xytext=(3, 0),
                textcoords="offset points",
                va="center",
                fontsize="small",
            )
        axes.set_xlim(0, rows[column].astype(float).max() * 1.15)  # room for the last value
        axes.grid(True, axis="x", alpha=0.3)
        if len(devices) > 1:
            axes.set_title(device, fontsize="medium")
    panels[-1].set_xlabel(xlabel)
    _strategy_legend(panels[0], rows["strategy"])
    low, high = rows.loc[rows[column].idxmin()], rows.loc[rows[column].idxmax()]
    caption = (
        f"{lead}. Least: {low['backend']} ({formatter(low[column])}); most: "
        f"{high['backend']} ({formatter(high[column])}), {high[column] / low[column]:.3g}x as "
        "much. Colours are strategies."
    )
    return Plot(title, caption, figure)


def time_bars(ok: pd.DataFrame, title: str) -> Plot | None:
    """The median time per call of each backend of one table (one size), as bars in the
    table's order (log x); None when nothing was timed."""
    ok = ok.dropna(subset=["median_s"])
    ok = ok[ok["strategy"] != "roofline"]  # a limit, never ranked: its ratio is in the table
    if ok.empty:
        return None
    return _bars_one_size(
        ok,
        "median_s",
        "median time per call (shorter is faster)",
        format_seconds,
        f"Time per call: {title}",
        "Shorter is faster",
    )


def speedup_bars(ok: pd.DataFrame, title: str) -> Plot | None:
    """Speedup of each backend over the scenario's sequential baseline (same run), log x."""
    ok = ok.dropna(subset=["speedup"])
    if ok.empty:
        return None
    baseline = ok["baseline"].iloc[0]
    labels = _labels(ok)
    figure, axes = _bar_figure(len(ok))
    positions = range(len(ok))
    axes.barh(positions, ok["speedup"], color=[_color(s) for s in ok["strategy"]])
    axes.set_yticks(list(positions), labels)
    axes.invert_yaxis()
    axes.set_xscale("log")
    _log_axis(axes.xaxis, lambda value: f"{value:g}x")
    axes.axvline(1.0, color="black", linewidth=0.8)
    for position, value in zip(positions, ok["speedup"], strict=True):
        axes.annotate(
            f"{value:.2g}x",
            (value, position),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize="small",
        )
    axes.set_xlabel(f"speedup over {baseline} (x, log scale; >1 is faster)")
    axes.margins(x=0.15)
    _strategy_legend(axes, ok["strategy"])
    best = ok.loc[ok["speedup"].idxmax()]
    slower = ok[ok["speedup"] < 1]["backend"].tolist()
    caption = (
        f"Bars right of the line beat {baseline}; "
        f"{best['backend']} is {best['speedup']:.2g}x faster."
    )
    if slower:
        caption += f" Slower than {baseline}: {', '.join(slower)}."
    return Plot(f"Speedup over {baseline}: {title}", caption, figure)


def decomposition_bars(ok: pd.DataFrame, title: str) -> Plot | None:
    """Where each backend's median goes: dispatch, kernel launch, transfer, recompilation,
    measured device time and the host's rest (100%; older results: device + host unsplit)."""
    ok = ok.dropna(subset=["remainder_pct"])
    if ok.empty:
        return None
    ok = ok.assign(unsplit_pct=ok["remainder_pct"].where(ok["device_pct"].isna(), 0.0))
    labels = _labels(ok)
    shown = [part for part in PARTS if ok[part[1]].fillna(0.0).gt(0.0).any()]
    figure, axes = _bar_figure(len(ok) + (len(shown) + 1) // 2 + 1)  # the legend below it
    positions = list(range(len(ok)))
    left = pd.Series(0.0, index=ok.index)
    for name, column, color in shown:
        values = ok[column].fillna(0.0).clip(lower=0.0)
        axes.barh(positions, values, left=left, color=color, label=name)
        left = left + values
    for position, median in zip(positions, ok["median_s"], strict=True):
        axes.annotate(
            format_seconds(median),
            (100, position),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize="small",
        )
    axes.set_yticks(positions, labels)
    axes.invert_yaxis()
    axes.set_xlim(0, 100)
    axes.set_xlabel("share of the median time per call [%] (median at the right)")
    figure.legend(  # below the bars, so that it never covers a median at their right
        loc="outside lower center", ncols=2, title="time spent in", fontsize="small"
    )
    overhead = sum(ok[column].fillna(0.0).clip(lower=0.0) for _, column, _ in OVERHEADS)
    worst = ok.loc[overhead.idxmax()]
    if overhead.max() >= 1.0:
        part = max(OVERHEADS, key=lambda p: worst[p[1]] if pd.notna(worst[p[1]]) else -1)
        caption = (
            f"Red to brown are overheads, estimated from counts x unit costs (recompilation "
            f"measured). {worst['backend']} loses the most to them: {overhead.max():.0f}% "
            f"of its time, mostly {part[0]}."
        )
    else:
        caption = "Overheads (counts x unit costs) are under 1% of every backend's time."
    measured = ok.dropna(subset=["device_pct"])
    if not measured.empty:
        host = measured.loc[measured["host_pct"].idxmax()]
        caption += (
            f" Dark green is device time measured from the trace, light green the host's "
            f"rest (Python, native code, waits): largest in {host['backend']} "
            f"({host['host_pct']:.0f}%)."
        )
    return Plot(f"Where the time goes: {title}", caption, figure)


def devices_side_by_side(rows: pd.DataFrame, title: str) -> Plot | None:
    """Median per backend on each device (log x): CPU vs GPU side by side.

    ``rows``: the ok cells of one scenario, size and dtype; None with fewer than 2 devices.
    """
    devices = list(dict.fromkeys(rows["device"]))
    if len(devices) < 2:
        return None
    backends = list(dict.fromkeys(rows["backend"]))
    figure, axes = _bar_figure(len(backends) * len(devices) * 0.6)
    height = 0.8 / len(devices)
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"]
    for index, device in enumerate(devices):
        by_backend = rows[rows["device"] == device].groupby("backend")["median_s"].min()
        values = [by_backend.get(name) for name in backends]
        positions = [b + index * height for b in range(len(backends))]
        axes.barh(positions, values, height=height, label=device, color=colors[index % 5])
    axes.set_yticks([b + 0.4 - height / 2 for b in range(len(backends))], backends)
    axes.invert_yaxis()
    axes.set_xscale("log")
    _log_axis(axes.xaxis, format_seconds)
    axes.set_xlabel("median time per call (log scale; shorter is faster)")
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1), title="device")
    best = rows.loc[rows["median_s"].idxmin()]
    caption = (
        f"Each backend on each device. Fastest overall: {best['backend']} on {best['device']} "
        f"({format_seconds(best['median_s'])}). A backend whose bars differ most is the one "
        "the device changes most."
    )
    return Plot(f"Devices side by side: {title}", caption, figure)


def scaling(rows: pd.DataFrame, title: str) -> Plot | None:
    """Throughput against the number of devices, one line per backend, with the ideal
    (N x its 1-device throughput) dashed. ``rows``: from
    `scanbench.reports.scaling.scaling_rows`."""
    if rows.empty:
        return None
    unit = rows["unit"].iloc[0] or "calls"
    figure = Figure(figsize=(7.5, 4.5), layout="constrained")
    axes = figure.add_subplot()
    for index, (backend, line) in enumerate(rows.groupby("backend", sort=False)):
        color = f"C{index}"
        axes.plot(line["devices"], line["throughput"], marker="o", color=color, label=backend)
        one = line[line["devices"] == 1]["throughput"]
        if not one.empty:
            ideal = one.iloc[0] * line["devices"]
            axes.plot(line["devices"], ideal, linestyle="--", color=color, alpha=0.5,
                      label=f"{backend}: ideal (N x 1 device)")  # fmt: skip
    counts = sorted(rows["devices"].unique())
    axes.set_xscale("log", base=2)
    axes.set_xticks(counts, [str(c) for c in counts])
    axes.xaxis.set_minor_locator(NullLocator())
    axes.set_yscale("log")
    _log_axis(axes.yaxis, number)
    axes.set_xlabel("devices")
    axes.set_ylabel(f"throughput [{unit}/s] (log scale)")
    axes.grid(True, alpha=0.3)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    last = rows.sort_values("devices").groupby("backend").tail(1)
    parts = [
        f"{r.backend} at {r.devices} devices: {r.scaling_speedup:.2f}x "
        f"({r.efficiency:.0%} efficient)"
        for r in last.itertuples()
        if pd.notna(r.scaling_speedup)
    ]
    caption = "Solid lines at the dashed ones scale perfectly. " + "; ".join(parts) + "."
    return Plot(f"Scaling over devices: {title}", caption, figure)


def _labels(ok: pd.DataFrame) -> list[str]:
    if ok["run"].nunique() > 1:
        return [f"{r.backend} (run {r.run})" for r in ok.itertuples()]
    return ok["backend"].tolist()


def parameter_sweeps(ok: pd.DataFrame, title: str) -> list[Plot]:
    """Median time against a backend parameter (``--param``), one plot per backend and
    parameter measured at two or more values in one run of this table."""
    plots = []
    swept = ok[ok["params"] != "{}"]
    for (_, name), rows in swept.groupby(["run", "backend_name"], sort=False):
        values = [json.loads(text) for text in rows["params"]]
        for param in dict.fromkeys(key for value in values for key in value):
            points = sorted(
                (value[param], median)
                for value, median in zip(values, rows["median_s"], strict=True)
                if param in value and pd.notna(median)
            )
            if len({x for x, _ in points}) < 2:
                continue
            figure = Figure(figsize=(6.0, 3.2), layout="constrained")
            axes = figure.add_subplot()
            xs, ys = [str(x) for x, _ in points], [y for _, y in points]
            axes.plot(xs, ys, marker="o", color=_color(rows["strategy"].iloc[0]))
            axes.set_yscale("log")
            _log_axis(axes.yaxis, format_seconds)
            axes.set_xlabel(param)
            axes.set_ylabel("median time per call")
            best = min(points, key=lambda point: point[1])
            caption = (
                f"{name}: the fastest {param} measured is {best[0]} "
                f"({format_seconds(best[1])}); other parameters at their values in the table."
            )
            plots.append(Plot(f"{name} vs {param}: {title}", caption, figure))
    return plots


def archive_heatmaps(ok: pd.DataFrame, title: str) -> Plot | None:
    """The final archive of every cell that stored one (`scanbench.ArchiveMap`): one
    heatmap per backend of the best objective per grid cell, on one colour scale, empty
    cells blank; None when no cell of the table stored an archive."""
    found = ok[ok["archive_map"].notna()] if "archive_map" in ok else ok.iloc[:0]
    if found.empty:
        return None
    maps = list(found["archive_map"])
    grids = [np.array(m.objective, dtype=float) for m in maps]  # None -> nan
    values = np.concatenate([grid[np.isfinite(grid)] for grid in grids])
    low, high = (values.min(), values.max()) if values.size else (0.0, 1.0)
    columns = min(len(maps), 4)
    rows = -(-len(maps) // columns)
    figure = Figure(figsize=(1.0 + 2.6 * columns, 0.6 + 2.6 * rows), layout="constrained")
    panels = figure.subplots(rows, columns, squeeze=False).ravel()
    colormap = colormaps["viridis"].with_extremes(bad="#eeeeee")
    image = None
    for axes, label, archive, grid in zip(panels, _labels(found), maps, grids, strict=False):
        (x_low, x_high), (y_low, y_high) = archive.ranges
        image = axes.imshow(
            np.ma.masked_invalid(grid.T),  # rows along the first measure: it is x
            origin="lower",
            extent=(x_low, x_high, y_low, y_high),
            aspect="auto",
            cmap=colormap,
            vmin=low,
            vmax=high,
            interpolation="nearest",
        )
        cells = archive.cells[0] * archive.cells[1]
        axes.set_title(f"{label}\n{archive.occupied} of {cells} cells", fontsize="small")
        axes.set_xlabel(archive.measures[0], fontsize="x-small")
        axes.set_ylabel(archive.measures[1], fontsize="x-small")
        axes.tick_params(labelsize="x-small")
    for axes in panels[len(maps) :]:
        axes.set_axis_off()
    figure.colorbar(image, ax=list(panels[: len(maps)]), label="best objective", shrink=0.8)
    filled = "; ".join(
        f"{label}: {archive.occupied} cells"
        for label, archive in zip(_labels(found), maps, strict=True)
    )
    caption = (
        "The final archive of each backend: the best objective found in each cell of the "
        "measure grid (one colour scale, empty cells blank). Backends that search alike "
        f"fill the same region. Cells filled: {filled}."
    )
    return Plot(f"Final archive: {title}", caption, figure)

"""The text of `scanbench profile`: one traced call's counts (`scanbench.counts.Counts`), its
dispatches by function, top kernels, loops, transfers, device-busy share and diagnosis;
`scanbench.profile`'s ``Profile.text()`` prints its kernel and loop lines too."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scanbench.counts import Counts
from scanbench.diagnosis import Facts, diagnose
from scanbench.trace_route import TraceFiles, TraceRoute
from scanbench.units import format_seconds


def _operations(static) -> str:
    """The operations per call from XLA's cost analysis (loops included), or why not."""
    if static.get("flops") is None:
        why = static.get("operations_error") or "not counted"
        return f"operations per call: not known ({why})"
    least = "at least " if static.get("custom_calls") else ""
    return (
        f"operations per call (XLA's cost analysis, loops included): {least}"
        f"{static['flops']:,.0f} flops, {static.get('transcendentals') or 0:,.0f} "
        f"transcendentals, {static.get('bytes_accessed') or 0:,.0f} bytes accessed"
    )


def kernel_lines(kernels_by_op: Mapping[str, float], top: int = 10) -> list[str]:
    """The ``top`` kernels executed most often per call, by HLO op."""
    busiest = sorted(kernels_by_op.items(), key=lambda item: -item[1])[:top]
    return [f"top {top} kernels by count:", *(f"  {count:>8g}  {name}" for name, count in busiest)]


def loop_lines(static: Mapping[str, Any]) -> list[str]:
    """The static HLO estimate: kernels, GPU launch equivalents, each compiled loop's
    kernels per iteration, the operations per call (none without a static count)."""
    if not static.get("available"):
        return []
    lines = [
        f"static HLO estimate: {static['kernels']} kernels on this device, "
        f"{static['launch_equivalent']} GPU launch equivalent"
    ]
    for name, info in static["executables"].items():
        lines += [
            f"  {name}: loop {loop['name']} x{loop['trip_count']}: "
            f"{loop['body_kernels']} kernels per iteration"
            + (" (one native kernel on CPU)" if loop["cpu_native"] else "")
            for loop in info["loops"]
        ]
    lines.append(_operations(static))
    return lines


def render(counts: Counts, label: str, files: TraceFiles, top: int = 10) -> str:
    """Lines for the terminal. The caller has checked that the trace itself succeeded."""
    trace = counts.trace
    lines = [
        f"trace of one call of {label}: {files.directory}",
        *files.lines(),
        f"dispatches: {trace['dispatches']}, executions: {trace['executions']}, "
        f"kernels: {trace['kernels']}, device puts: {trace['device_puts']}",
        "dispatches by function:",
        *(f"  {count:>8}  {name}" for name, count in trace["dispatches_by_function"].items()),
        *kernel_lines(trace["kernels_by_op"], top),
        *loop_lines(counts.static),
    ]
    static = counts.static
    hottest = (counts.section("python") or {}).get("hottest") or []
    if hottest:
        lines.append("host code, most executed lines per call:")
        lines += [f"  {line['count']:>8}  {line['where']}: {line['code']}" for line in hottest]
    transfers = counts.transfers
    if transfers:
        d2h = transfers["note"] or transfers["d2h"]
        lines.append(
            f"transfers: H2D {transfers['h2d']} ({transfers['h2d_bytes']} B logged), D2H {d2h}"
        )
    spans = counts.spans
    if spans:
        lines.append(
            f"device busy (under the profiler): {format_seconds(spans['device_busy_s'])} of "
            f"the traced call's {format_seconds(spans['wall_s'])}, in kernels "
            f"{format_seconds(spans['kernel_busy_s'])}; inline on the calling thread "
            f"{format_seconds(spans['inline_busy_s'])}; host conversions: "
            f"{spans['host_conversions']}"
        )
    host_code = bool(counts.section("python"))  # its lines are counted for host code only
    facts = Facts(
        None,
        counts.per_call(),
        counts.breakdowns()["kernels_by_op"],
        static=dict(static),
        python=dict(counts.section("python")),
        engine="numpy" if host_code else "jax",
        trace_route=TraceRoute.at(files.directory),  # written: no call to suggest
    )
    lines.append("diagnosis (counts of one call; `scanbench run` adds their time shares):")
    lines += [f"  {finding.text()}" for finding in diagnose(facts)]
    return "\n".join(lines)

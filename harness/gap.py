"""Why a faster neighbour is faster: the measured differences that account for the gap.

When another backend of the same table does the same work faster (`scanbench.findings.
Neighbour`), the gap per call is ``this median - its median``. Each difference between
the two cells that the run measured is priced with the run's own unit costs, and its
seconds are given as a share of the gap, the largest first:

- **dispatches**, **transfers** (H2D transfers and host conversions), **waits** and
  **compilations**: the parts of the two decompositions (`scanbench.decomposition`:
  counts x unit costs, the waits' device-idle time, the measured compile time); they do
  not overlap one another, and they are the causes the probes *locate* (by function).
- **kernels**: the kernels executed per call x the measured cost of one launch (the
  decomposition's launch part), with each compiled loop described by its trip count and
  kernels per iteration (static HLO).
- **fresh memory**: the page faults per call on fresh memory x the run's price of one
  base-page fault (only a price of that kind: a mixed-page price overstates a base page
  4-5x), divided over the cores the cell used (the faults of two threads are taken at
  once; an assumption, said), plus the extra XLA temporaries written and read once at
  the copy bandwidth of the cell's memory bound (a floor). The fix is chosen by where
  the cell's fresh bytes come from (its output, XLA's copies, other temporaries).
- **bytes moved**: the bytes XLA's cost analysis counts the program accessing per call
  (every op's operands and outputs, loops included; cached operands too) above the
  neighbour's, at the copy bandwidth of the cell's memory bound (both JAX cells; the
  extra temporaries are then in it, not priced again).
- **arithmetic**: XLA's operation count (loops included) above the neighbour's, at the
  run's measured arithmetic rate on the cell's cores (both JAX cells).
- **dependent chains**: a cell that runs the scenario's dependent chains one after
  another (declared, `scanbench.evidence.chain_floor`: steps x the run's measured latency
  of one, over its cores) against a neighbour that interleaves them (declared): the
  floor is time the neighbour's overlapped chains do not spend. Against a serial
  neighbour on more cores the difference is its cores, priced below, not again here.
- **host loop**: host code's Python loop iterations per call above the neighbour's: the
  profiled time of the own functions in the loop's file (scaled to the median; the
  opaque library calls they make included) less the neighbour's whole median, or,
  unprofiled, x the measured cost of a minimal library call (a floor).
- **host between calls**: a JAX cell that makes several device calls per call: the
  traced call's time in which no XLA program executed, beyond the priced dispatches,
  transfers, waits and compilations (the decomposition's ``host``: Python, NumPy and
  library code between the calls, measured by the trace's idle time, not assumed), above
  the neighbour's; both cells JAX and this cell's traced call reliable (the neighbour's
  host time is taken as at most its whole median where its own is not: a floor).
- **host calls into a library**: a host engine's (NumPy, SciPy, Numba, Python) time in
  each library its code calls, from one profiled call (`scanbench.probes.host_calls`,
  scaled to the median), above the neighbour's time in the same library (none for one
  compiled program; not known for host code that was not profiled). A JAX loop's
  host-between-calls difference names the functions that take most of it the same way.
  What a host engine's own code takes (a Numba kernel's time is its Python function's)
  is said where no trace says where the unexplained time is.
- **cores**: a neighbour measured on more cores (`scanbench.diagnosis.CORES_DIFFER` or
  more): the part of the gap that spreading this cell's core time over its cores would
  remove, ``median x (1 - mine / theirs)``.

Shares never sum past 100%: the differences are taken largest first and each is given
at most what the gap has left (priced apart, the parts of memory and arithmetic overlap
the device time). What no difference accounts for is said with its share, and, where
both traced calls are reliable, where that time is: the device time of both per call and
the kernels that take this cell's (``spans.busy_by_op``). Nothing here
is a label by elimination: a difference is named only with its counts and its price.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from .evidence import (
    CHAIN_FIX,
    CHAIN_MARGIN,
    HOST_CODE,
    arithmetic,
    chain_floor,
    fault_cores,
    fault_kind,
    fault_seconds,
    operations,
    origin,
)
from .findings import (
    FIXES,
    LOCATED,
    Difference,
    Facts,
    Gap,
    duration,
    megabytes,
    number,
    reliable,
)
from .host_gap import (
    between_calls,
    eager_jax,
    eager_text,
    host_libraries,
    host_loop,
    library_fix,
    own_code,
)

SMALLEST = 0.05  # a difference under this share of the gap is not named


def _part(facts: Facts, name: str) -> float:
    return number(facts.decomposition, f"{name}_s")


def _loops(facts: Facts) -> str:
    """``2 loops (100 iterations x 7 kernels, 100 x 4)``; ``no loop`` or "" (not known)."""
    executables = (facts.static.get("executables") or {}).values()
    loops = [loop for info in executables for loop in info.get("loops") or ()]
    if not facts.static.get("available"):
        return ""
    if not loops:
        return "no compiled loop"
    shown = []
    for index, loop in enumerate(loops[:3]):
        trip, body = loop.get("trip_count"), loop.get("body_kernels", 0)
        if loop.get("cpu_native"):
            shown.append(f"{trip or '?'} iterations in one native kernel")
        elif index == 0:
            shown.append(f"{trip or '?'} iterations x {body} kernels")
        else:
            shown.append(f"{trip or '?'} x {body}")
    more = f" and {len(loops) - 3} more" if len(loops) > 3 else ""
    return f"{len(loops)} loop{'s' * (len(loops) > 1)} ({', '.join(shown)}{more})"


def _kernels(mine: Facts, theirs: Facts) -> Difference | None:
    seconds = _part(mine, "launch") - _part(theirs, "launch")
    if seconds <= 0:
        return None
    a, b = number(mine.per_call, "kernels"), number(theirs.per_call, "kernels")
    cost = mine.costs.get("kernel_launch_s") or 0.0
    shapes = [_loops(mine), _loops(theirs)]
    # the loops' shapes only where they tell the two programs apart
    shape = f" ({shapes[0]} vs {shapes[1]})" if all(shapes) and shapes[0] != shapes[1] else ""
    return Difference(
        "kernels",
        seconds,
        0.0,
        f"{a:,.0f} vs {b:,.0f} kernels per call{shape}, x {cost * 1e9:,.0f} ns a launch",
        "fewer kernels per iteration: fuse the loop body, unroll the scan, or move the "
        "loop's work into one batched call",
    )


def _fresh_memory(mine: Facts, theirs: Facts) -> Difference | None:
    """Fresh-page faults at their kind's price (or the kernel time measured, when more),
    over the cell's cores, and the extra
    temporaries' traffic at the bound's copy bandwidth (see the module doc)."""
    said, seconds = [], 0.0
    faults = (mine.faults_per_call or 0.0) - (theirs.faults_per_call or 0.0)
    priced = fault_seconds(mine, faults)
    kernel = _kernel_time(mine, theirs) if faults >= 1 else None
    if kernel is not None and (priced is None or kernel[0] > priced[0]):
        seconds += kernel[0]
        floor = (
            f", at least {duration(priced[0])} of it at a {fault_kind(mine)}'s price"
            if priced
            else ""
        )
        said.append(
            f"{kernel[1]}: the faulting, zeroing and unmapping of fresh memory, "
            f"{mine.faults_per_call or 0:,.0f} vs {theirs.faults_per_call or 0:,.0f} "
            f"fresh-page faults per call{floor}"
        )
    elif priced is not None:
        seconds += priced[0]
        said.append(
            f"{mine.faults_per_call or 0:,.0f} vs {theirs.faults_per_call or 0:,.0f} "
            f"fresh-page faults per call {priced[1]}"
        )
    temp_mine = float(mine.memory.get("temp_bytes") or 0)
    temp_theirs = float(theirs.memory.get("temp_bytes") or 0)
    bandwidth = mine.bound_bytes_per_s
    extra = temp_mine - temp_theirs
    if bandwidth and extra >= 2**20 and _accessed(mine) is None:  # else priced as bytes moved
        seconds += extra / bandwidth
        said.append(
            f"XLA temporaries {megabytes(temp_mine)} vs {megabytes(temp_theirs)}, written and "
            f"read once at {bandwidth / 1e9:,.3g} GB/s (a floor)"
        )
    if seconds <= 0:
        return None
    where, fix = origin(mine)
    return Difference("fresh memory", seconds, 0.0, "; ".join(said) + f" (most: {where})", fix)


def _kernel_time(mine: Facts, theirs: Facts) -> tuple[float, str] | None:
    """The CPU time a timed call spent in the kernel above the neighbour's, measured
    (``getrusage``'s system time, every thread's), over the cores the cell used (the
    threads in the kernel at once: assumed); None where either run did not read it."""
    a, b = mine.system_per_call, theirs.system_per_call
    if a is None or b is None or a <= b:
        return None
    cores = fault_cores(mine)
    over = f" over the {cores:.1f} cores it used (assumed at once)" if cores >= 1.05 else ""
    return (a - b) / cores, (
        f"CPU time in the kernel {duration(a)} vs {duration(b)} per call (measured){over}"
    )


def _accessed(facts: Facts) -> float | None:
    """Bytes XLA's cost analysis counts the program accessing per call (loops included)."""
    static = facts.static
    if facts.engine != "jax" or not static.get("available"):
        return None
    value = static.get("bytes_accessed")
    return float(value) if value else None


def _bytes_moved(mine: Facts, theirs: Facts) -> Difference | None:
    """The bytes XLA's programs access per call above the neighbour's, at the copy
    bandwidth of the cell's memory bound (both JAX cells): every op's operands and
    outputs, so bytes a cache serves are in it too, said as such."""
    a, b, bandwidth = _accessed(mine), _accessed(theirs), mine.bound_bytes_per_s
    if a is not None and b is None and bandwidth and theirs.engine in HOST_CODE:
        return _bytes_beyond_host(mine, theirs, a, bandwidth)
    if a is None or b is None or not bandwidth or a - b < 2**20 or a / b < 1.1:
        return None
    level = f" ({mine.bound_level})" if mine.bound_level else ""
    return Difference(
        "bytes moved",
        (a - b) / bandwidth,
        0.0,
        f"XLA's program accesses {a / 1e9:,.3g} GB vs {b / 1e9:,.3g} GB per call (cost analysis: "
        f"every op's operands and outputs, cached ones too) at the copy bandwidth{level}, "
        f"{bandwidth / 1e9:,.3g} GB/s",
        "move fewer bytes per call: fuse the passes, keep per-step results out of the "
        "scan's stacked outputs, block the work so each block stays in cache",
    )


def _bytes_beyond_host(
    mine: Facts, theirs: Facts, accessed: float, bandwidth: float
) -> Difference | None:
    """A JAX cell against host code (a Numba kernel: no cost analysis): the time XLA's
    program's accessed bytes take at the bound's copy bandwidth beyond the neighbour's
    whole median, a floor (the neighbour moved its bytes within its median)."""
    seconds = accessed / bandwidth - (theirs.median_s or 0.0)
    if seconds <= 0:
        return None
    level = f" ({mine.bound_level})" if mine.bound_level else ""
    return Difference(
        "bytes moved",
        seconds,
        0.0,
        f"XLA's program accesses {accessed / 1e9:,.3g} GB per call (cost analysis: every "
        f"op's operands and outputs, cached ones too): {duration(accessed / bandwidth)} at "
        f"the copy bandwidth{level}, {bandwidth / 1e9:,.3g} GB/s, beyond the "
        f"{duration(theirs.median_s or 0.0)} of the neighbour's whole call (a floor)",
        "move fewer bytes per call: fuse the passes, keep per-step results out of the "
        "scan's stacked outputs, block the work so each block stays in cache",
    )


def _arithmetic(mine: Facts, theirs: Facts) -> Difference | None:
    if mine.engine != "jax" or theirs.engine != "jax":
        return None
    counted, other, priced = operations(mine), operations(theirs), arithmetic(mine)
    if counted is None or other is None or priced is None or other[0] <= 0:
        return None
    extra = counted[0] - other[0]
    if extra <= 0 or counted[0] / other[0] < 1.1:
        return None
    seconds = priced.seconds * extra / counted[0]
    return Difference(
        "arithmetic",
        seconds,
        0.0,
        f"XLA's program runs {counted[0] / other[0]:.2f}x the operations of the neighbour's "
        "(cost analysis, loops included) at the measured FMA rate",
        "fewer operations: the neighbour's formulation of the same work does less",
    )


def _chains(mine: Facts, theirs: Facts) -> Difference | None:
    """This cell's chain floor against a neighbour that interleaves the same chains: the
    latency its serial chains spend that the neighbour's overlapped chains do not."""
    floor = chain_floor(mine)
    if floor is None or theirs.chains != "interleaved" or not mine.median_s:
        return None
    if floor.seconds > mine.median_s * CHAIN_MARGIN:  # the chains were not serial
        return None
    return Difference(
        "dependent chains",
        floor.seconds,
        0.0,
        f"{floor.text}, against chains interleaved (declared): {duration(floor.seconds)} "
        "per call that interleaving overlaps",
        CHAIN_FIX,
    )


def _cores(mine: Facts, theirs: Facts, differ: float) -> Difference | None:
    if mine.cores is None or theirs.cores is None or not mine.median_s:
        return None
    a, b = mine.cores.count, theirs.cores.count
    if b - a < differ or b <= 0:
        return None
    return Difference(
        "cores",
        mine.median_s * (1 - a / b),
        0.0,
        f"it ran on {theirs.cores.text()} against {mine.cores.text()}",
        "use every core: prange, or shard the batch over devices (`sharded`)",
    )


OVERHEADS: Mapping[str, str] = {  # decomposition part: the located cause it prices
    "dispatch": "dispatches",
    "transfer": "transfers",
    "sync": "waits",
    "compile": "compilations",
}


def _overhead_text(name: str, mine: Facts, theirs: Facts) -> str:
    pairs = {
        "dispatch": [("dispatches", "dispatches")],
        "transfer": [("h2d", "H2D transfers"), ("host_conversions", "host conversions")],
        "sync": [("waits", "waits")],
        "compile": [("compiles", "compilations")],
    }[name]
    shown = [
        f"{number(mine.per_call, key):,.0f} vs {number(theirs.per_call, key):,.0f} {label}"
        for key, label in pairs
        if number(mine.per_call, key) != number(theirs.per_call, key)
    ]
    where = ""
    if name == "transfer":
        callers = mine.conversions.get("by_function") or {}
        if callers:
            top = max(callers.items(), key=lambda item: item[1])
            where = f" (in {top[0]} {top[1]:g})"
    cost = mine.costs.get("dispatch_queued_s") if name == "dispatch" else None
    each = f" x {cost * 1e6:.1f} us" if cost else ""
    return (", ".join(shown) or f"{name} time") + " per call" + where + each


def _overheads(mine: Facts, theirs: Facts) -> list[Difference]:
    """The located causes: the decompositions' priced parts, plus, for host code, its
    profiled time in JAX's eager calls and conversions (`eager_jax`)."""
    found = []
    eager = eager_jax(mine, theirs)
    for name, mechanism in OVERHEADS.items():
        seconds = _part(mine, name) - _part(theirs, name)
        extra = eager.get(mechanism, 0.0)
        if seconds > 0 or extra > 0:
            text, fix = _overhead_text(name, mine, theirs), FIXES[LOCATED[mechanism]]
            if extra > 0:
                calls = eager_text(mine, conversions=mechanism == "transfers")
                kind = "conversions" if mechanism == "transfers" else "eager calls"
                text += (
                    f"; JAX {kind} profiled on the host ({calls}; one profiled call, scaled "
                    f"to the median): {duration(extra)} more"
                )
                if mechanism == "dispatches" and extra > seconds:  # mostly eager calls
                    fix = f"{library_fix('jax')}; or {fix}"
            found.append(Difference(mechanism, max(seconds, 0.0) + extra, 0.0, text, fix))
    return found


def explain(mine: Facts, theirs: Facts, differ: float) -> Gap | None:
    """What accounts for the gap between ``mine`` and its faster neighbour ``theirs``
    (see the module doc); None without both medians."""
    if not mine.median_s or not theirs.median_s or mine.median_s <= theirs.median_s:
        return None
    gap = mine.median_s - theirs.median_s
    priced: list[Difference] = [
        *_overheads(mine, theirs),
        *host_libraries(mine, theirs),
        *(
            d
            for d in (
                _kernels(mine, theirs),
                _fresh_memory(mine, theirs),
                _bytes_moved(mine, theirs),
                _arithmetic(mine, theirs),
                _chains(mine, theirs),
                host_loop(mine, theirs),
                between_calls(mine, theirs),
                _cores(mine, theirs, differ),
            )
            if d is not None
        ),
    ]
    where = _device_location(mine, theirs) or own_code(mine)
    return Gap(gap, _shared_out(priced, gap), where)


def _device_location(mine: Facts, theirs: Facts) -> str:
    """Where the gap's time is when the trace says: device time per call of both, and
    the kernels that take this cell's (``busy_by_op``, runs that stored it)."""
    a, b = mine.decomposition.get("device_s"), theirs.decomposition.get("device_s")
    if a is None or b is None or a <= b or not (reliable(mine) and reliable(theirs)):
        return ""
    text = f"device time {duration(a)} vs {duration(b)} per call (traced)"
    by_op = dict((mine.spans or {}).get("busy_by_op") or {})
    if by_op:
        total = sum(by_op.values()) or 1.0
        top = sorted(by_op.items(), key=lambda item: -item[1])[:3]
        text += "; its longest kernels: " + ", ".join(
            f"{name} {seconds / total:.0%}" for name, seconds in top
        )
    return text


def _shared_out(priced: Sequence[Difference], gap: float) -> tuple[Difference, ...]:
    """Largest first, each given at most what the gap has left; the small ones dropped."""
    left, named = 1.0, []
    for difference in sorted(priced, key=lambda d: -d.seconds):
        share = min(difference.seconds / gap, left)
        if share < SMALLEST:
            continue
        left -= share
        named.append(dataclasses.replace(difference, share=share))
    return tuple(named)

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

from .evidence import HOST_CODE, arithmetic, fault_seconds, loop_of, operations, origin
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

SMALLEST = 0.05  # a difference under this share of the gap is not named
# calls that run a compiled program: their profiled time holds the program's, not host code
PROGRAM_CALLS = ("Compiled.__call__", "PjitFunction.__call__")


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
    """Fresh-page faults at a base page's price, over the cell's cores, and the extra
    temporaries' traffic at the bound's copy bandwidth (see the module doc)."""
    said, seconds = [], 0.0
    faults = (mine.faults_per_call or 0.0) - (theirs.faults_per_call or 0.0)
    priced = fault_seconds(mine, faults)
    kernel = _kernel_time(mine, theirs) if faults >= 1 else None
    if kernel is not None and (priced is None or kernel[0] > priced[0]):
        seconds += kernel[0]
        floor = f", at least {duration(priced[0])} of it at a base page's price" if priced else ""
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
    cores = max(mine.cores.count if mine.cores and mine.cores.measured else 1.0, 1.0)
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


def _profiled(facts: Facts) -> list[tuple[str, bool, float, int]]:
    """(name, own, seconds scaled to the median, calls) of each function the host
    profile kept (`scanbench.probes.host_calls`), most time first; [] without one."""
    wall = float(facts.host_calls.get("wall_s") or 0.0)
    if wall <= 0 or not facts.median_s:
        return []
    scale = facts.median_s / wall  # the profiled call's time by function, at the median's
    return [
        (
            str(f.get("name", "")),
            bool(f.get("own")),
            float(f.get("seconds") or 0.0) * scale,
            int(f.get("calls") or 0),
        )
        for f in facts.host_calls.get("functions") or ()
    ]


def _loop_function_s(facts: Facts, where: str) -> tuple[float, str] | None:
    """(seconds at the median, names) of the own functions in the file of the loop's
    hottest line, from the host profile: what the loop costs, the opaque library calls
    it makes (an f2py or ufunc call reports nothing to a profiler) included."""
    file = where.split(":", 1)[0]
    functions = [f for f in _profiled(facts) if f[1] and f[0].split(":", 1)[0] == file]
    if not functions:
        return None
    return sum(f[2] for f in functions), ", ".join(f[0] for f in functions[:2])


def _host_loop(mine: Facts, theirs: Facts) -> Difference | None:
    """A host loop's iterations above the neighbour's: priced at the profiled time of
    the loop's own functions less the neighbour's whole median (what the loop costs
    beyond all the work the neighbour does), or, unprofiled, at a minimal library call
    per iteration (a floor)."""
    loop, call = loop_of(mine), mine.rates.get("numpy_call_s")
    if loop is None or not call:
        return None
    other = loop_of(theirs)
    extra = loop[0] - (other[0] if other is not None else 0.0)
    if extra < 2:
        return None
    said = f"a Python loop of {loop[0]:,.0f} iterations per call ({loop[1]})"
    floor = extra * call
    profiled = _loop_function_s(mine, loop[1])
    if profiled is not None and theirs.median_s and profiled[0] - theirs.median_s > floor:
        seconds, names = profiled
        return Difference(
            "host loop",
            seconds - theirs.median_s,
            0.0,
            f"{said}: its function {names} ~{duration(seconds)} per call (profiled, scaled "
            f"to the median; the library calls it makes included) vs the neighbour's whole "
            f"call, {duration(theirs.median_s)}",
            LOOP_FIX,
        )
    return Difference(
        "host loop",
        floor,
        0.0,
        f"{said} x {call * 1e6:.2g} us of a minimal library call (a floor)",
        LOOP_FIX,
    )


LOOP_FIX = "call the library once over the batch (a batched routine, jax.vmap or lax.scan)"


def _between_calls(mine: Facts, theirs: Facts) -> Difference | None:
    """Host code that runs between a JAX cell's device calls while no XLA program
    executes: the traced call's device-idle time beyond the priced dispatches, transfers,
    waits and compilations (the decomposition's ``host``), above the neighbour's."""
    if mine.engine != "jax" or theirs.engine != "jax":
        return None  # a host engine's host time is its work, not time between calls
    calls = number(mine.per_call, "dispatches")
    a = mine.decomposition.get("host_s")
    if calls < 2 or not reliable(mine) or a is None or not theirs.median_s:
        return None
    b, bound = theirs.decomposition.get("host_s"), ""
    if b is None or not reliable(theirs):  # at most its whole median: a floor of the gap
        b, bound = theirs.median_s, "at most "
    if a <= b:
        return None
    fix = (
        "move the whole loop into one jitted program (lax.scan over the steps), so no "
        "host code runs between device calls"
        if number(theirs.per_call, "dispatches") <= 1
        else "move the host work between the device calls into the jitted program"
    )
    return Difference(
        "host between calls",
        a - b,
        0.0,
        f"host code between its {calls:,.0f} device calls (traced: no XLA program running), "
        f"beyond their priced dispatch: {duration(a)} vs {bound}{duration(b)} per call"
        + _profiled_in(mine),
        fix,
    )


def _library_calls(facts: Facts) -> dict[str, list[tuple[str, float, int]]]:
    """{package: [(function, seconds scaled to the median, calls)]}, the largest package
    first, of the library functions one profiled call of the cell's code made
    (`scanbench.probes.host_calls`; own code apart)."""
    packages: dict[str, list[tuple[str, float, int]]] = {}
    for name, own, seconds, calls in _profiled(facts):
        if not own:
            packages.setdefault(name.split(".")[0], []).append((name, seconds, calls))
    return dict(sorted(packages.items(), key=lambda item: -sum(f[1] for f in item[1])))


def _short(name: str) -> str:
    """``jax._src.random.core.fold_in`` -> ``fold_in``; ``cma.evolution_strategy.
    CMAEvolutionStrategy.tell`` -> ``CMAEvolutionStrategy.tell``."""
    parts = name.split(".")
    kept = [p for p in parts[1:] if p[:1].isupper()] or parts[-1:]
    return ".".join([*kept[:1], parts[-1]] if kept[0] != parts[-1] else kept[:1])


def _profiled_in(facts: Facts) -> str:
    """``; profiled, most in: jax fold_in x8 ~7.9 ms, ...`` (at most three functions)."""
    functions = sorted(
        (
            f
            for group in _library_calls(facts).values()
            for f in group
            if not f[0].endswith(PROGRAM_CALLS)
        ),
        key=lambda f: -f[1],
    )
    shown = [
        f"{name.split('.')[0]} {_short(name)} x{calls} ~{duration(seconds)}"
        for name, seconds, calls in functions[:3]
        if seconds >= 0.05 * (facts.median_s or 0.0)
    ]
    return f"; profiled, most in: {', '.join(shown)}" if shown else ""


def _library_fix(package: str) -> str:
    if package == "jax":
        return (
            "jit the JAX calls made on the host (each eager call dispatches on its own): "
            "derive keys and small arrays inside the compiled program"
        )
    return f"do {package}'s work inside the compiled program, or once per batch"


# JAX's methods that bring a value to the host: their profiled time is a transfer's
CONVERSIONS = (
    "__float__",
    "__int__",
    "__bool__",
    "__index__",
    "__complex__",
    "__array__",
    "item",
    "tolist",
    "device_get",
)


def _is_conversion(name: str) -> bool:
    return name.rsplit(".", 1)[-1] in CONVERSIONS


def _eager_jax(mine: Facts, theirs: Facts) -> dict[str, float]:
    """A host engine's profiled time in JAX's own functions (one profiled call, scaled
    to the median), as the located causes it is, above the neighbour's: {"transfers":
    the conversions' time (`CONVERSIONS`: each waits for its value and copies it to the
    host), "dispatches": the other eager calls' time less their priced dispatch (the
    decomposition prices every dispatch already)}. Empty where the neighbour's own host
    calls are not known."""
    if mine.engine not in HOST_CODE:
        return {}
    host_side = theirs.engine in HOST_CODE or number(theirs.per_call, "dispatches") >= 2
    if host_side and not theirs.host_calls:
        return {}
    each = mine.costs.get("dispatch_queued_s") or 0.0

    def split(facts: Facts) -> dict[str, float]:
        parts = {"transfers": 0.0, "dispatches": 0.0}
        for name, seconds, calls in _library_calls(facts).get("jax", ()):
            if name.endswith(PROGRAM_CALLS):
                continue  # a compiled program's call holds the program's time
            if _is_conversion(name):
                parts["transfers"] += seconds
            else:
                parts["dispatches"] += max(seconds - calls * each, 0.0)
        return parts

    a, b = split(mine), split(theirs)
    return {key: a[key] - b[key] for key in a if a[key] - b[key] > 0}


def _eager_text(facts: Facts, conversions: bool) -> str:
    """``ArrayImpl.__float__ x256 ~2.17 ms`` of the JAX functions of one kind."""
    shown = [
        f"{_short(name)} x{calls} ~{duration(seconds)}"
        for name, seconds, calls in _library_calls(facts).get("jax", ())
        if _is_conversion(name) == conversions and not name.endswith(PROGRAM_CALLS)
    ]
    return ", ".join(shown[:3])


def _host_libraries(mine: Facts, theirs: Facts) -> list[Difference]:
    """Host code's time in each library it calls (one profiled call, scaled to the
    median) above the neighbour's time in the same library (none where it calls none on
    the host): for host engines, whose host time is their work; a JAX loop's host time
    is `_between_calls`', and where that is not known (its traced call not reliable),
    its calls into libraries other than JAX (a JAX call's time holds its program's)."""
    skip: tuple[str, ...] = ()
    if mine.engine not in HOST_CODE:
        if _between_calls(mine, theirs) is not None or number(mine.per_call, "dispatches") < 2:
            return []  # one program, or its host time priced whole between the calls
        skip = ("jax",)  # a JAX call's time holds its program's: only other libraries
    host_side = theirs.engine in HOST_CODE or number(theirs.per_call, "dispatches") >= 2
    if host_side and not theirs.host_calls:
        return []  # its own host calls were not profiled: not known
    theirs_calls = _library_calls(theirs)
    found = []
    if mine.engine in HOST_CODE:
        skip = ("jax",)  # JAX's own calls from host code: the located causes they are
    for package, functions in _library_calls(mine).items():
        if package in skip:
            continue
        a = sum(f[1] for f in functions)
        b = sum(f[1] for f in theirs_calls.get(package, ()))
        if a <= b:
            continue
        named = ", ".join(f"{_short(n)} x{c} ~{duration(t)}" for n, t, c in functions[:3])
        found.append(
            Difference(
                f"host calls into {package}",
                a - b,
                0.0,
                f"host calls into {package} ({named}; one profiled call, scaled to the "
                f"median): {duration(a)} vs {duration(b)} per call",
                _library_fix(package),
            )
        )
    return found


def _own_code(facts: Facts) -> str:
    """Where a host engine's own code takes its time (a Numba kernel's time is its Python
    function's), when no trace says where: ``its own code, profiled: ...``."""
    if facts.engine not in HOST_CODE or not facts.median_s:
        return ""
    shown = [
        f"{name} ~{duration(seconds)}"
        for name, own, seconds, _ in _profiled(facts)
        if own and seconds >= 0.05 * facts.median_s
    ][:2]
    if not shown:
        return ""
    return "its own code, profiled (a Numba kernel counts as its function): " + ", ".join(shown)


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
    profiled time in JAX's eager calls and conversions (`_eager_jax`)."""
    found = []
    eager = _eager_jax(mine, theirs)
    for name, mechanism in OVERHEADS.items():
        seconds = _part(mine, name) - _part(theirs, name)
        extra = eager.get(mechanism, 0.0)
        if seconds > 0 or extra > 0:
            text, fix = _overhead_text(name, mine, theirs), FIXES[LOCATED[mechanism]]
            if extra > 0:
                calls = _eager_text(mine, conversions=mechanism == "transfers")
                kind = "conversions" if mechanism == "transfers" else "eager calls"
                text += (
                    f"; JAX {kind} profiled on the host ({calls}; one profiled call, scaled "
                    f"to the median): {duration(extra)} more"
                )
                if mechanism == "dispatches" and extra > seconds:  # mostly eager calls
                    fix = f"{_library_fix('jax')}; or {fix}"
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
        *_host_libraries(mine, theirs),
        *(
            d
            for d in (
                _kernels(mine, theirs),
                _fresh_memory(mine, theirs),
                _bytes_moved(mine, theirs),
                _arithmetic(mine, theirs),
                _host_loop(mine, theirs),
                _between_calls(mine, theirs),
                _cores(mine, theirs, differ),
            )
            if d is not None
        ),
    ]
    where = _device_location(mine, theirs) or _own_code(mine)
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

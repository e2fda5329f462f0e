"""What a cell's numbers say to change: the dominant cost, its evidence and its fix.

Pure rules over stored numbers (per-call counts, the time decomposition, the distance to
a limit, rates measured in the run), each one documented here and unit-tested on
synthetic counts. A rule *fires* when its evidence is present; a fired rule whose share
of the median is at least `DOMINANT` names the cell's dominant cost. Shares come from
`scanbench.decomposition` (counts x unit costs measured in the same run, device time
from the trace). No rule fires by elimination: a cell none of them explains is *not
known*, said with what was measured and how to find out.

Like with like: a cell's cores are the ones its timed calls used (measured,
`scanbench.probes.usage`; the backend's declaration only for results stored before),
and every per-core comparison uses them: the memory bound (one core's copy bandwidth, or
every core's), the arithmetic rate, the roofline and the faster neighbour.

- **the roofline**: the scenario's roofline kernel (strategy ``roofline``) is the limit
  the other rows are measured against, a reference: it is not diagnosed.
- **near a limit**: the median is within `NEAR_LIMIT` of the memory bound (``x BW bound``:
  the bytes the work must move at the copy bandwidth of the level its working set fits
  in, measured in the run; a copy of that level reaches 1.0-1.1x) or within
  `NEAR_ROOFLINE` of the roofline kernel per core (``x roofline``: the same arithmetic,
  hand-written, in the same run), no overhead rule has a share of at least `MINOR` and no
  backend of the table is faster: nothing left to gain from the loop structure.
- **memory-bound**: the traffic that is known takes at least `MOST` of the median: the
  bytes the work must move at the bound's copy bandwidth (its cores'), plus the page
  faults its timed calls took on fresh memory (`scanbench.probes.usage`: a fresh output
  or carry every call) x the run's measured cost of one (`scanbench.probes.rates`).
- **compute-bound**: an operation count at the run's measured arithmetic rate (an FMA
  chain's, in the cell's dtype, on the cores the cell used) takes at least `MOST` of the
  median. The count: for a JAX backend, XLA's cost analysis of its compiled programs with
  every loop's trip count (`scanbench.probes.operations`); for host code (NumPy, Numba,
  SciPy), the scenario's declared ``work()["flops"]``; else there is none and no
  arithmetic is claimed.
- **latency-bound**: a backend declared to run the scenario's dependent chains one after
  another (``Backend.chains = "serial"``; the scenario declares ``work()["chains"]`` and
  ``["chain_steps"]``: a Thomas sweep per system) whose steps at the run's measured
  latency of one dependent step (``x = c / (b - a x)``, `scanbench.probes.rates`), over
  the cores it used, take at least `MOST` of the median: no core runs a chain faster, so
  only interleaving chains (several systems in one inner loop) goes below it. A backend
  that interleaves, or did not declare, gets no chain floor (the throughput rates bound
  it instead).
- **host loop**: host code (NumPy, SciPy, Numba, or a function that dispatches nothing
  to XLA) that runs a Python loop of at least `MANY_DISPATCHES` iterations per call (its
  hottest line, counted: `scanbench.probes.lines`): named as such, with iterations x the
  measured cost of one minimal library call (a lower bound of the calls' fixed cost) as
  its share: call the library once over the batch.
- **dispatch-bound**: more than one dispatch per call and dispatches x the measured cost
  of one are at least `MINOR` of the median: move the loop into ``lax.scan`` or ``vmap``.
- **many small executions**: at least `MANY_DISPATCHES` dispatches per call whose
  measured device time averages under `SMALL_EXECUTION_S` each: the device time is spent
  in launches too small to use the device, not in work; its share is the device share.
  Batch the items into one call (``vmap``) or move the loop into ``lax.scan``.
- **sync-bound**: explicit waits per item whose device-idle time is at least `MINOR` of
  the median; where the table holds the same loop without the waits (the same functions
  dispatched as often, the same kernels, no waits), the measured difference to it is the
  cost instead, with its interval, and a loop the waits do not slow down is told so.
- **transfer-bound**: host<->device round trips per call (H2D transfers and host
  conversions such as ``np.array(x)`` or ``float(x)``) priced by path (a range when the
  path is unknown; its middle is the share): keep values on the device inside the loop.
- **recompiling**: traces or XLA compilations inside every call (``jax.monitoring``),
  timed: jit once outside the loop, keep shapes and static arguments fixed.
- **launch-bound on a GPU** (an estimate on a CPU run): GPU launch equivalents (static
  HLO: loop bodies x trip counts) x `GPU_LAUNCH_S` per launch is a floor a GPU cannot beat
  without fusing or command buffers (CUDA graphs); reported when that floor is at least
  `DOMINANT` of this run's median, labelled as a prediction. On a GPU run the measured
  launch cost (``environment.overheads.kernel_launch_s``) replaces the documented one and
  the share is a measurement (`MINOR` then suffices).
- **layout**: transpose kernels inside the call: the data is not in the layout the loop
  reads (copies are named with them; alone they are mostly XLA's loop-carry copies).
- **temporaries**: XLA plans temporaries of at least `TEMPORARIES_DOMINATE` of the
  minimum the work holds (inputs + output, when that minimum is at least
  `MEANINGFUL_MINIMUM_BYTES`), naming the largest: memory, not time (no share).
- **live arrays grow**: JAX arrays a call leaves alive once its output is dropped, grown
  by two calls in a row (memory over time, not the call's time: no share).
- **folded constants**: arrays folded into the compiled programs as constants (a
  closed-over ``jax.Array`` or NumPy array) of at least `FOLDED_CONSTANTS` bytes: each
  new value compiles again, and the compile and the executable grow with it; pass it as
  an argument (memory and compile time, not the call's time: no share).
- **far from its limit**: a JAX backend at more than `FAR_FROM_LIMIT` x the scenario's
  roofline kernel or its memory bound, and no overhead dominates: XLA's options decide
  how it compiles too; ``scanbench flags`` measures them (a suggestion, no share).
- **a faster backend**: another backend of the same table does the same work at least
  `FASTER_BY` x faster and the `TIE_CONFIDENCE` interval of the ratio of their samples
  excludes a tie (never two medians alone). Which one is named: first the same program
  with other XLA flags (the same functions dispatched as often, the same loops, other
  flags), then the fastest on at most as many cores (always named), else the fastest on
  more cores, with both core counts and the ratio per core.
- **unexplained host time**: a JAX backend whose reliable decomposition leaves at least
  `DOMINANT` of the median on the host with no count explaining it: look at the trace;
  where the first faster backend's gap puts at least `EXPLAINS` of it in profiled host
  code, that backend leads instead (the host time is located, not unexplained).
- **not known**: nothing above has evidence: the sentence says what was measured (the
  shares, the known traffic and arithmetic at the measured rates, of the median) and
  how to find out (the trace, by the call that works where the reader is:
  `scanbench.trace_route`; a profiler of the host code).

A decomposition the decomposition itself marks unreliable (its traced call took over 2x
the median, or its parts exceed the median) gives no measured share: the rules then read
the counts x unit costs alone, and the sentence says why.

The constants are rules, not measurements: `MOST` is "most of the time"; `NEAR_LIMIT` is
how close to a copy of its level a kernel must be to be at the bound (a copy reaches
1.0-1.1x; a kernel at 2-3x is doing something else).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from .evidence import (
    MOST,
    compute_bound,
    host_loop,
    latency_bound,
    memory_bound,
    not_known,
)
from .findings import (
    EXPLAINS,
    FIXES,
    HOST_ENGINES,
    LOCATED,
    MANY_DISPATCHES,
    SMALL_EXECUTION_S,
    TIE_CONFIDENCE,
    Cores,
    Cost,
    Facts,
    Finding,
    Neighbour,
    cores_of,
    duration,
    facts_of,
    megabytes,
    number,
    percent,
    reliable,
    unreliable,
    untimed,
)

__all__ = [  # the diagnosis's names, its vocabulary included (scanbench.findings)
    "DOMINANT",
    "FASTER_BY",
    "MINOR",
    "MOST",
    "NEAR_LIMIT",
    "TIE_CONFIDENCE",
    "Cores",
    "Cost",
    "Facts",
    "Finding",
    "Neighbour",
    "cores_of",
    "diagnose",
    "facts_of",
    "summary",
]

DOMINANT = 0.20  # a share of the median at least this names the dominant cost
MINOR = 0.05  # below this a cost is not worth naming
NEAR_LIMIT = 1.5  # within 1.5x of the copy bandwidth of the working set's level (see above)
NEAR_ROOFLINE = 1.5  # within 1.5x of the roofline kernel, per core (see above)
TEMPORARIES_DOMINATE = 0.5  # XLA temporaries / the work's minimum from which they are named
MEANINGFUL_MINIMUM_BYTES = 2**20  # below this (MPPI's 56-byte inputs) no ratio means much
FOLDED_CONSTANTS = 2**20  # constants folded into the programs from which they are named
UNTIMED_COUNT = 10  # without a decomposition (scanbench profile): this many per call fire
FASTER_BY = 1.3  # a backend of the same table this much faster is named
CORES_DIFFER = 0.5  # cells this many cores apart ran on different numbers of cores
FAR_FROM_LIMIT = 2.0  # a JAX cell this far from its roofline or memory bound: try XLA options
# A CUDA kernel launch from the host costs ~3-10 us without CUDA graphs (NVIDIA's guidance
# and JAX issue reports of per-op launch overhead); 5 us is the documented default until a
# GPU run measures it (environment.overheads.kernel_launch_s of that run).
GPU_LAUNCH_S = 5e-6
# A small device-to-host copy with the synchronisation it forces (the host waits for the
# stream to drain, then cudaMemcpy over PCIe) costs ~10-20 us on current NVIDIA GPUs
# before any queued work is counted; 15 us is the documented default until a GPU run
# measures it (environment.overheads.d2h_latency_s of that run).
GPU_SYNC_S = 15e-6


def _near_limit(facts: Facts) -> Finding | None:
    limits = [
        (facts.x_bandwidth, "the memory-bandwidth bound", NEAR_LIMIT),
        (facts.x_roofline, "the roofline kernel per core", NEAR_ROOFLINE),
    ]
    for ratio, what, near in limits:
        if ratio is not None and ratio == ratio and ratio <= near:
            level = f" ({facts.bound_level})" if facts.bound_level and "bandwidth" in what else ""
            return Finding(
                Cost.NEAR_LIMIT,
                None,
                f"{ratio:.2f}x {what}{level}",
                "nothing left to gain from the loop structure; only less work or data "
                "(a smaller dtype, fewer passes) or a faster machine",
            )
    return None


COUNTS_NAMED = {
    "dispatches": "dispatches",
    "kernels": "kernels",
    "launch_equivalent": "GPU launch equiv.",
    "h2d": "H2D",
    "host_conversions": "host conversions",
    "waits": "waits",
    "compiles": "compilations",
}


def _faster(facts: Facts) -> Finding | None:
    """The first faster backend of the table (`Neighbour`, chosen by the report): named
    with the interval of the ratio, the cores of both when they differ, and the counts in
    which the two differ."""
    if not facts.faster:
        return None
    first = facts.faster[0]
    return Finding(
        Cost.FASTER,
        None,
        _neighbour_text(first),
        _neighbour_fix(first),
        label=_neighbour_label(first),
        neighbour=first,
    )


def _neighbour_fix(neighbour: Neighbour) -> str:
    """The change that removes the largest measured difference (`scanbench.gap`), and
    "see what X does differently" only for the share no difference accounts for."""
    gap = neighbour.gap
    largest = None if gap is None else gap.largest
    if gap is None or largest is None:
        return f"see what {neighbour.name} does differently"
    rest = 1.0 - gap.explained
    if rest < MINOR:
        return largest.fix
    return (
        f"{largest.fix}; for the other {percent(rest)} of the gap no measured difference "
        f"accounts: see what {neighbour.name} does differently"
    )


def _neighbour_text(neighbour: Neighbour) -> str:
    """``scanned +xla, the same program with other XLA flags, does the same work 1.37x
    faster (95% interval 1.33-1.41x; ...)``."""
    what = (
        f"{neighbour.name}, the same program with other XLA flags,"
        if neighbour.same_program
        else neighbour.name
    )
    text = f"{what} does the same work {neighbour.ratio:.2f}x faster ({neighbour.interval()}"
    cores = neighbour.cores
    if cores is not None and _differ(*cores):
        mine, theirs = cores
        per_core = neighbour.per_core
        cheaper = (
            f"{per_core:.2f}x less core time per call"
            if per_core >= 1
            else f"{1 / per_core:.2f}x more core time per call"
        )
        text += f"; on {theirs.text()} against this backend's {mine.text()}: {cheaper}"
    elif cores is not None and not (cores[0].measured and cores[1].measured):
        text += "; threads not measured"
    explained = neighbour.gap is not None and neighbour.gap.largest is not None
    shown = [
        f"{COUNTS_NAMED.get(key, key)} {_count(mine)} vs {_count(theirs)}"
        for key, (mine, theirs) in neighbour.counts.items()
    ]
    if shown and not explained:  # an explained gap names its counts with their prices
        text += "; " + "; ".join(shown)
    elif not shown and not neighbour.same_program:
        text += "; the same counts: its loop or layout"
    if neighbour.caveats:
        text += "; the ratio may not hold: " + _caveats_text(neighbour.caveats)
    text += ")"
    if neighbour.gap is not None:
        text += ": " + neighbour.gap.text()
    return text


def _caveats_text(caveats: Sequence[str]) -> str:
    """``both cells were disturbed`` where each side's caveat is the same."""
    mine = [c.removeprefix("this backend's cell ") for c in caveats if c.startswith("this")]
    theirs = [c.removeprefix("its cell ") for c in caveats if c.startswith("its cell")]
    both = [c for c in mine if c in theirs]
    said = [f"both cells {c.replace('was ', 'were ', 1)}" for c in both]
    said += [f"this backend's cell {c}" for c in mine if c not in both]
    said += [f"its cell {c}" for c in theirs if c not in both]
    said += [c for c in caveats if not c.startswith(("this backend's cell ", "its cell "))]
    return ", ".join(said)


def _neighbour_label(neighbour: Neighbour) -> str:
    cores = neighbour.cores
    on = f" on {cores[1].text()}" if cores is not None and _differ(*cores) else ""
    return f"{neighbour.name} {neighbour.ratio:.2f}x faster{on}"


def _differ(mine: Cores, theirs: Cores) -> bool:
    """Whether two cells ran on different numbers of cores (`CORES_DIFFER` or more apart)."""
    return abs(mine.count - theirs.count) >= CORES_DIFFER


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _sync(facts: Facts) -> Finding | None:
    """Explicit waits per item: the device-idle time inside them, or the measured
    difference to the same loop without them where the table has it."""
    waits = number(facts.per_call, "waits")
    if waits < 2:
        return None
    by_function = facts.conversions.get("waits_by_function") or {}
    where = ", ".join(f"{name} {count:g}" for name, count in list(by_function.items())[:2])
    where = f" (in {where})" if where else ""
    if untimed(facts):
        if waits < UNTIMED_COUNT:
            return None
        return Finding(
            Cost.SYNC,
            None,
            f"{waits:,.0f} waits per call{where} (a timed run gives their share)",
            FIXES[Cost.SYNC],
        )
    sibling = facts.without_waits
    if sibling is not None:
        return _sync_against(facts, waits, where, sibling)
    if not reliable(facts):
        return Finding(
            Cost.SYNC,
            None,
            f"{waits:,.0f} waits per call{where}{unreliable(facts)}",
            FIXES[Cost.SYNC],
        )
    share = number(facts.decomposition, "sync_fraction")
    if share < MINOR:
        return None
    return Finding(
        Cost.SYNC,
        share,
        f"{waits:,.0f} waits per call{where}{_wait_prices(facts, waits, share)}",
        FIXES[Cost.SYNC],
    )


def _on_cores(sibling: Neighbour) -> str:
    """``; on 1.7 cores against this backend's 1.2 cores`` where the two differ (without
    the waits, the host queues calls while XLA's threads run)."""
    cores = sibling.cores
    if cores is None or not _differ(*cores):
        return ""
    return f"; on {cores[1].text()} against this backend's {cores[0].text()}"


def _sync_against(facts: Facts, waits: float, where: str, sibling: Neighbour) -> Finding:
    """The waits priced by the same loop without them (`Facts.without_waits`)."""
    measured = f"the same loop without them, {sibling.name}, measured in this run"
    if sibling.low > 1.0:  # the loop without the waits is faster, the interval says
        share = 1.0 - 1.0 / sibling.ratio
        return Finding(
            Cost.SYNC,
            share,
            f"{waits:,.0f} waits per call{where} cost {percent(share)} of the time: {measured}, "
            f"is {sibling.ratio:.2f}x faster ({sibling.interval()}{_on_cores(sibling)})",
            FIXES[Cost.SYNC],
            neighbour=sibling,
        )
    if sibling.high < 1.0:
        said = f"is {1 / sibling.ratio:.2f}x slower ({sibling.interval()})"
    else:
        said = f"is as fast ({sibling.interval()})"
    return Finding(
        Cost.SYNC,
        None,
        f"{waits:,.0f} waits per call{where}, but {measured}, {said}: the waits cost "
        "nothing measurable here",
        "nothing to change for this machine; on a GPU each wait is a synchronisation",
        label="waits (no measurable cost)",
        neighbour=sibling,
    )


def _wait_prices(facts: Facts, waits: float, share: float) -> str:
    """What the waits cost: the device-idle time inside them (or its upper bound, for
    records stored before it was measured), or the probe's price of one wait."""
    pending, counted = facts.conversions.get("pending_waits"), facts.conversions.get("waits")
    if facts.conversions.get("waited_s") is None or pending is None or not counted:
        cost = facts.costs.get("wait_s")
        each = f" x {cost * 1e6:.0f} us" if cost else ""
        return f"{each} = {percent(share)} of the time"
    pending = waits * min(max(pending / counted, 0.0), 1.0)  # the counted calls, per call
    if facts.decomposition.get("sync_bound"):
        return (
            f", {pending:,.0f} of them on a value still being computed: the device sat idle "
            f"inside them for at most {percent(share)} of the time (the traced call's idle share; "
            "stored before the idle time inside waits was measured)"
        )
    return (
        f", {pending:,.0f} of them on a value still being computed: the device sat idle "
        f"inside them for {percent(share)} of the time"
    )


def _dispatch(facts: Facts) -> Finding | None:
    dispatches = number(facts.per_call, "dispatches")
    if untimed(facts):
        if dispatches < UNTIMED_COUNT:
            return None
        return Finding(
            Cost.DISPATCH,
            None,
            f"{dispatches:,.0f} dispatches per call (a timed run gives their share)",
            FIXES[Cost.DISPATCH],
        )
    share = number(facts.decomposition, "dispatch_fraction")
    if dispatches <= 1 or share < MINOR:
        return None
    cost = facts.costs.get("dispatch_queued_s")
    each = f" x {cost * 1e6:.1f} us" if cost else ""
    return Finding(
        Cost.DISPATCH,
        share,
        f"{dispatches:,.0f} dispatches per call{each} = {percent(share)} of the time",
        FIXES[Cost.DISPATCH],
    )


def _small_executions(facts: Facts) -> Finding | None:
    dispatches = number(facts.per_call, "dispatches")
    device = facts.decomposition.get("device_fraction")
    if untimed(facts) or dispatches < MANY_DISPATCHES or not device or not facts.median_s:
        return None
    if not reliable(facts):  # its share is the traced device share
        return None
    each = device * facts.median_s / dispatches
    if each >= SMALL_EXECUTION_S or device < MINOR:
        return None
    return Finding(
        Cost.SMALL_EXECUTIONS,
        device,
        f"{dispatches:,.0f} dispatches per call, each running {each * 1e6:,.0f} us of device "
        f"work on average ({percent(device)} of the time in all)",
        "batch the items into one call (vmap over them) or move the loop into lax.scan, "
        "so that each launch does more work",
    )


def _transfer(facts: Facts) -> Finding | None:
    h2d = number(facts.per_call, "h2d")
    conversions = number(facts.per_call, "host_conversions")
    low = number(facts.decomposition, "transfer_low_fraction")
    high = number(facts.decomposition, "transfer_high_fraction")
    share = number(facts.decomposition, "transfer_fraction")
    fix = FIXES[Cost.TRANSFER]
    if untimed(facts):
        if h2d + conversions < UNTIMED_COUNT:
            return None
        return Finding(
            Cost.TRANSFER,
            None,
            f"{h2d:,.0f} host-to-device transfers and {conversions:,.0f} host conversions "
            "per call (a timed run gives their share)",
            fix,
        )
    if h2d + conversions <= 1 or share < MINOR:
        return None
    priced = percent(share) if high - low < 0.01 else f"{percent(low)}-{percent(high)}"
    return Finding(
        Cost.TRANSFER,
        share,
        f"{h2d:,.0f} host-to-device transfers and {conversions:,.0f} host conversions per "
        f"call{_made_by(facts)} = {priced} of the time",
        fix,
    )


def _made_by(facts: Facts) -> str:
    """`` (np.array 8, float 8; in tuner.evaluate 16)``: the conversions' kinds and the
    functions that made them, most first."""
    kinds = facts.conversions.get("by_kind") or {}
    callers = facts.conversions.get("by_function") or {}
    if not kinds:
        return ""

    def top(counts: Mapping[str, float]) -> str:
        ranked = sorted(counts.items(), key=lambda item: -item[1])[:3]
        return ", ".join(f"{name} {count:g}" for name, count in ranked)

    return f" ({top(kinds)}; in {top(callers)})"


def _gpu_sync(facts: Facts) -> Finding | None:
    """Host conversions on a CPU run, priced as a GPU would make them pay: each a
    device-to-host copy and a synchronisation (`GPU_SYNC_S`), a labelled estimate named
    whatever its share here (a conversion per item is what a GPU run pays for once the
    larger costs are gone); on a GPU the measured transfers price them (the transfer
    rule)."""
    conversions = number(facts.per_call, "host_conversions")
    if facts.platform == "gpu" or conversions < 1:
        return None
    floor = conversions * GPU_SYNC_S
    share = floor / facts.median_s if facts.median_s else None
    of_median = f" ({percent(share)} of this median)" if share is not None else ""
    return Finding(
        Cost.GPU_SYNC,
        None,
        f"{conversions:,.0f} host conversions per call{_made_by(facts)}, zero-copy on this "
        f"CPU; on a GPU each is a device-to-host copy and a wait, ~{GPU_SYNC_S * 1e6:.0f} us: "
        f"{floor * 1e3:.3g} ms{of_median}",
        "keep the values on the device (jnp instead of np, no float()/int()/.item() inside "
        "the loop) and convert once, after it",
        estimate=True,
    )


CAUSES = (  # what JAX's cache-miss explanation means, in a reviewer's words
    ("re-defined repeatedly", "a new function object on every call (defined inside the loop)"),
    ("never seen function", "a function object it has not seen before"),
    ("never seen input type signature", "new argument shapes or dtypes"),
    ("static argument", "a new value of a static argument"),
)


def _why_recompiled(facts: Facts) -> str:
    """``: `scan` compiled 80 times, called from `command` at mppi.py:123 (a new function
    object on every call)``; empty when the probe did not say."""
    by_function = facts.compilations.get("by_function") or {}
    if not by_function:
        return ""
    name, kinds = next(iter(by_function.items()))
    text = f": `{name}` compiled {kinds.get('compile', 0):,} times per call"
    misses = facts.compilations.get("misses") or []
    if misses:
        miss = misses[0]
        reason = miss.get("reason", "")
        cause = next((said for key, said in CAUSES if key in reason), reason[:120])
        text += f", called from `{miss.get('caller')}` at {miss.get('where')} ({cause})"
    return text


def _recompile(facts: Facts) -> Finding | None:
    compiles = number(facts.per_call, "compiles")
    traces = number(facts.per_call, "traces")
    if compiles < 1 and traces < 1:
        return None
    share = None if untimed(facts) else number(facts.decomposition, "compile_fraction")
    timed = "" if share is None else f" = {percent(share)} of the time"
    return Finding(
        Cost.RECOMPILE,
        share,
        f"{compiles:,.0f} compilations and {traces:,.0f} traces inside every call"
        f"{_why_recompiled(facts)}{_recompile_stages(facts)}{timed}",
        FIXES[Cost.RECOMPILE],
    )


def _recompile_stages(facts: Facts) -> str:
    """`` (by stage: trace 12 ms, lower 4 ms, XLA compile 80 ms per call)``: the counted
    call's compile events by JAX's stages; empty when the probe stored no durations."""
    found = facts.compilations
    stages = [("trace", "trace_s"), ("lower", "lower_s"), ("XLA compile", "compile_s")]
    if not any(found.get(key) for _, key in stages):
        return ""
    said = ", ".join(f"{name} {duration(float(found.get(key) or 0.0))}" for name, key in stages)
    return f" (by stage: {said} per call)"


def _gpu_launch(facts: Facts) -> Finding | None:
    launches = number(facts.per_call, "launch_equivalent")
    if launches <= 1 or not facts.median_s:
        return None
    on_gpu = facts.platform == "gpu"
    cost = (facts.costs.get("kernel_launch_s") if on_gpu else None) or GPU_LAUNCH_S
    floor = launches * cost
    share = floor / facts.median_s
    if share < (MINOR if on_gpu else DOMINANT):
        return None
    where = "per call" if on_gpu else "per call on a GPU"
    return Finding(
        Cost.GPU_LAUNCH,
        share if on_gpu else None,
        f"{launches:,.0f} kernel launches {where} x {cost * 1e6:.0f} us = {floor * 1e3:.3g} ms "
        f"({percent(share)} of this median)",
        "fuse the loop body into fewer kernels, unroll the scan, or run it as a CUDA graph "
        "(command buffers)",
        estimate=not on_gpu,
    )


def _layout(facts: Facts) -> Finding | None:
    """Transposes in the compiled executables that hold a loop (static HLO): the data is
    not in the layout the loop reads. Eager ops of code that is not jitted are not
    looked at: their transposes are no loop's layout."""
    executables = (facts.static.get("executables") or {}).values()
    looping = [e for e in executables if e.get("loops")]
    transposes = sum(
        (e.get("transposes_inside_loops", 0) + e.get("transposes_outside_loops", 0))
        * e.get("calls_per_run", 1)
        for e in looping
    )
    if transposes < 1:
        return None
    copies = sum(e.get("copies_inside_loops", 0) * e.get("calls_per_run", 1) for e in looping)
    inside = sum(e.get("transposes_inside_loops", 0) for e in looping)
    where = "inside the loop body" if inside else "around the compiled loop"
    return Finding(
        Cost.LAYOUT,
        None,
        f"{transposes:,.0f} transposes per call {where} (and {copies:,.0f} copies in loop bodies)",
        "keep the data in the layout the loop reads (time-major for a scan over time): "
        "transpose once, outside the call, or choose in_axes/out_axes",
    )


def _temporaries(facts: Facts) -> Finding | None:
    temp, minimum = facts.memory.get("temp_bytes"), facts.memory.get("minimum_bytes")
    if not temp or not minimum or minimum < MEANINGFUL_MINIMUM_BYTES:
        return None
    if temp < TEMPORARIES_DOMINATE * minimum:
        return None
    named = list(facts.memory.get("temporaries") or [])[:3]
    largest = ", ".join(f"{t['instruction']} {megabytes(t['bytes'])}" for t in named)
    return Finding(
        Cost.TEMPORARIES,
        None,
        f"XLA plans {megabytes(temp)} of temporaries per call, {temp / minimum:.1f}x the "
        f"{megabytes(minimum)} the work must hold" + (f" (largest: {largest})" if largest else ""),
        "keep per-step results out of the scan's stacked outputs (block the work so they "
        "stay small) and transpose outside the call",
    )


def _leak(facts: Facts) -> Finding | None:
    """JAX arrays a call leaves alive once its output is dropped, grown over two calls."""
    growth = facts.memory.get("live_growth") or {}
    nbytes = int(growth.get("bytes_per_call") or 0)
    if nbytes <= 0:
        return None
    arrays = int(growth.get("arrays_per_call") or 0)
    return Finding(
        Cost.LEAK,
        None,
        f"each call leaves {arrays:,} more JAX arrays ({megabytes(nbytes)}) alive after its "
        "output is dropped (two calls in a row, each grew the live arrays)",
        "drop the device arrays the function keeps between calls (a list, a cache, a "
        "global): a long run grows until device memory runs out",
    )


def _constants(facts: Facts) -> Finding | None:
    """Arrays folded into the compiled programs as constants (the static HLO)."""
    executables = (facts.static.get("executables") or {}).values()
    total = sum(int(e.get("constant_bytes") or 0) for e in executables)
    if total < FOLDED_CONSTANTS:
        return None
    largest = max(executables, key=lambda e: int(e.get("constant_bytes") or 0))
    return Finding(
        Cost.CONSTANTS,
        None,
        f"{megabytes(total)} of arrays folded into the compiled program as constants "
        f"(largest: {largest.get('largest_constant') or '?'}): a closed-over array is "
        "compiled into the program, which compiles again for each new value",
        "pass large arrays as arguments of the jitted function instead of closing over "
        "them (jax.device_put them once)",
    )


def _far_from_limit(facts: Facts) -> Finding | None:
    """A JAX cell far from the roofline kernel or the memory bound: XLA's options may
    matter (`scanbench flags` measures them)."""
    if facts.engine != "jax":
        return None
    far = [
        f"{ratio:.1f}x {what}"
        for ratio, what in (
            (facts.x_roofline, "the roofline kernel per core"),
            (facts.x_bandwidth, "the memory bound"),
        )
        if ratio is not None and ratio == ratio and ratio > FAR_FROM_LIMIT
    ]
    if not far:
        return None
    return Finding(
        Cost.FAR,
        None,
        " and ".join(far),
        "besides the code, XLA's options decide how it compiles: `scanbench flags` with "
        "this cell's --scenario, --backend and --size measures the platform's candidates "
        "against its current flags",
        label="far from its limit (try `scanbench flags`)",
    )


RULES = (
    _dispatch,
    _sync,
    _small_executions,
    _transfer,
    _recompile,
    _gpu_sync,
    _gpu_launch,
    _layout,
    _temporaries,
    _leak,
    _constants,
    _far_from_limit,
    memory_bound,
    compute_bound,
    latency_bound,
    host_loop,
)
# what the work itself spends time on
WORK = (Cost.MEMORY, Cost.COMPUTE, Cost.LATENCY, Cost.HOST_LOOP)


def diagnose(facts: Facts) -> tuple[Finding, ...]:
    """Every fired rule, the dominant cost first (see the module doc); a cell with none
    says what is not known. A faster backend of the same table is named right after the
    dominant cost, and nothing is "near a limit" beside one. The roofline row is a
    reference: not diagnosed."""
    if facts.reference:
        return (
            Finding(
                Cost.REFERENCE,
                None,
                "the scenario's roofline kernel: its arithmetic alone, the limit the other "
                "rows are measured against (x roofline)",
                "not diagnosed",
            ),
        )
    fired = [finding for rule in RULES if (finding := rule(facts)) is not None]
    neighbours = _neighbours(facts)
    backed = _backed(fired, neighbours)
    if backed is not None:  # a located cause explains the gap: it leads, the neighbour backs it
        timed = sorted(
            (f for f in fired if f.share is not None and not f.estimate and f.cost != backed.cost),
            key=lambda f: -(f.share or 0.0),
        )
        rest = [f for f in fired if f not in timed and f.cost != backed.cost]
        return (backed, *neighbours[1:], *timed, *rest)
    overheads = [
        f
        for f in fired
        if f.share is not None and f.share >= MINOR and not f.estimate and f.cost not in WORK
    ]
    limit = _near_limit(facts)
    if limit is not None and not overheads and not neighbours:
        return (limit, *(f for f in fired if f.cost != Cost.MEMORY))  # the limit, said once
    unknown = _the_rest(facts)
    timed = sorted(
        (f for f in fired if f.share is not None and not f.estimate),
        key=lambda f: -(f.share or 0.0),
    )
    leading = timed and (timed[0].share or 0.0) >= DOMINANT
    larger = unknown.cost == Cost.UNEXPLAINED and (
        not timed or (unknown.share or 0.0) > (timed[0].share or 0.0)
    )
    if larger and _host_located(neighbours):
        # the host time is not unexplained: the faster backend's gap says where it goes
        return (*neighbours, *timed, *(f for f in fired if f not in timed))
    if leading and larger:
        timed = [unknown, *timed]  # a priced share never hides a larger unexplained one
    rest = [f for f in fired if f not in timed]
    if timed and (timed[0].share or 0.0) >= DOMINANT:
        if timed[0].cost not in WORK:  # an overhead, not how XLA compiled
            rest = [f for f in rest if f.cost != Cost.FAR]
        return (timed[0], *neighbours, *timed[1:], *rest)
    if untimed(facts) and rest:  # counts alone: the overheads present, by rule
        return (*neighbours, *rest)
    if neighbours and unknown.cost == Cost.UNKNOWN:  # the neighbour is what is known
        return (*neighbours, *timed, *rest)
    return (*neighbours, unknown, *timed, *rest)


HOST_MECHANISMS = ("host between calls", "host loop", "host calls into ")


def _host_located(neighbours: Sequence[Finding]) -> bool:
    """Whether the first faster backend's gap puts at least `EXPLAINS` of it in host
    code, with the functions profiled (host between calls, a host loop, host calls into
    a library): then a cell's host time is explained, not "unexplained"."""
    first = neighbours[0].neighbour if neighbours else None
    largest = None if first is None or first.gap is None else first.gap.largest
    return (
        largest is not None
        and largest.mechanism.startswith(HOST_MECHANISMS)
        and largest.share >= EXPLAINS
    )


def _backed(fired: Sequence[Finding], neighbours: Sequence[Finding]) -> Finding | None:
    """The located cause (dispatches, transfers, waits, compilations) whose difference
    accounts for at least `EXPLAINS` of the gap to the first faster backend, as the
    lead, with that backend as its evidence; None otherwise."""
    first = neighbours[0].neighbour if neighbours else None
    largest = None if first is None or first.gap is None else first.gap.largest
    if largest is None or not largest.located or largest.share < EXPLAINS:
        return None
    cost = LOCATED[largest.mechanism]
    found = next((f for f in fired if f.cost == cost), None)
    if found is None:
        return None
    backing = (
        f"; {first.name} does the same work {first.ratio:.2f}x faster in this run "
        f"({first.interval()}), and this difference ({largest.text}) accounts for "
        f"{duration(largest.share * first.gap.seconds)} of the {duration(first.gap.seconds)} "
        "gap per call"
    )
    return dataclasses.replace(found, evidence=found.evidence + backing, neighbour=first)


def _neighbours(facts: Facts) -> list[Finding]:
    """The first faster backend as a finding, the others as labels."""
    first = _faster(facts)
    if first is None:
        return []
    others = [
        Finding(Cost.FASTER, None, _neighbour_text(n), "", label=_neighbour_label(n), neighbour=n)
        for n in facts.faster[1:]
    ]
    return [first, *others]


def _the_rest(facts: Facts) -> Finding:
    """When no rule dominates: host time of a JAX backend that no count explains (never
    "the work itself"), else what is not known and how to find out."""
    device = facts.decomposition.get("device_fraction")
    host = facts.decomposition.get("host_fraction")
    traced = reliable(facts)
    if facts.engine not in HOST_ENGINES and traced and host is not None and host >= DOMINANT:
        return Finding(
            Cost.UNEXPLAINED,
            host,
            f"host {percent(host)} of the time that no count explains "
            f"(device {percent(device or 0)}): Python between the calls, NumPy on the host, "
            "or waits the probes do not see",
            f"{facts.trace_route.look()}: the host thread's events show where",
        )
    return not_known(facts)


def summary(findings: Sequence[Finding]) -> str:
    """The dominant finding's text, and the others' names."""
    if not findings:
        return ""
    head, *others = findings
    text = head.text()
    # timed costs below the minor share are not worth a label; the rest are no shares
    others = [f for f in others if f.share is None or f.share >= MINOR]
    if others:
        text += " (also: " + ", ".join(f.label or str(f.cost) for f in others) + ")"
    return text

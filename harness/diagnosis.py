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
  `DOMINANT` of the median on the host with no count explaining it: look at the trace.
- **not known**: nothing above has evidence: the sentence says what was measured (the
  shares, the known traffic and arithmetic at the measured rates, of the median) and
  how to find out (``scanbench profile``; a profiler of the host code).

A decomposition the decomposition itself marks unreliable (its traced call took over 2x
the median, or its parts exceed the median) gives no measured share: the rules then read
the counts x unit costs alone, and the sentence says why.

The constants are rules, not measurements: `MOST` is "most of the time"; `NEAR_LIMIT` is
how close to a copy of its level a kernel must be to be at the bound (a copy reaches
1.0-1.1x; a kernel at 2-3x is doing something else).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from typing import Any

from .decomposition import decomposition_of

DOMINANT = 0.20  # a share of the median at least this names the dominant cost
MINOR = 0.05  # below this a cost is not worth naming
NEAR_LIMIT = 1.5  # within 1.5x of the copy bandwidth of the working set's level (see above)
NEAR_ROOFLINE = 1.5  # within 1.5x of the roofline kernel, per core (see above)
MOST = 0.5  # a count x a measured rate that takes this much of the median names the cause
TEMPORARIES_DOMINATE = 0.5  # XLA temporaries / the work's minimum from which they are named
MEANINGFUL_MINIMUM_BYTES = 2**20  # below this (MPPI's 56-byte inputs) no ratio means much
MANY_DISPATCHES = 100  # dispatches per call from which their size is looked at
SMALL_EXECUTION_S = 100e-6  # mean device time per dispatch below which it is small
UNTIMED_COUNT = 10  # without a decomposition (scanbench profile): this many per call fire
FASTER_BY = 1.3  # a backend of the same table this much faster is named
TIE_CONFIDENCE = 0.95  # ... and only when this interval of the ratio excludes 1
CORES_DIFFER = 0.5  # cells this many cores apart ran on different numbers of cores
FAR_FROM_LIMIT = 2.0  # a JAX cell this far from its roofline or memory bound: try XLA options
HOST_ENGINES = ("numpy", "numba", "scipy")  # host code: their host time is the work
FRESH_MEMORY_BYTES = 32 * 2**20  # glibc maps a buffer this large afresh on every allocation
# A CUDA kernel launch from the host costs ~3-10 us without CUDA graphs (NVIDIA's guidance
# and JAX issue reports of per-op launch overhead); 5 us is the documented default until a
# GPU run measures it (environment.overheads.kernel_launch_s of that run).
GPU_LAUNCH_S = 5e-6
# A small device-to-host copy with the synchronisation it forces (the host waits for the
# stream to drain, then cudaMemcpy over PCIe) costs ~10-20 us on current NVIDIA GPUs
# before any queued work is counted; 15 us is the documented default until a GPU run
# measures it (environment.overheads.d2h_latency_s of that run).
GPU_SYNC_S = 15e-6


class Cost(enum.StrEnum):
    REFERENCE = "reference"
    NEAR_LIMIT = "near a limit"
    FASTER = "a faster backend"
    SYNC = "sync-bound"
    UNEXPLAINED = "unexplained host time"
    COMPUTE = "compute-bound"
    MEMORY = "memory-bound"
    HOST_LOOP = "host loop"
    DISPATCH = "dispatch-bound"
    SMALL_EXECUTIONS = "many small executions"
    TRANSFER = "transfer-bound"
    RECOMPILE = "recompiling"
    GPU_LAUNCH = "launch-bound on a GPU"
    GPU_SYNC = "host syncs on a GPU"
    LAYOUT = "layout"
    TEMPORARIES = "temporaries"
    FAR = "far from its limit"
    UNKNOWN = "not known"


@dataclasses.dataclass(frozen=True)
class Finding:
    """One fired rule: what, its share of the median (None: not a time), why, what to do."""

    cost: Cost
    share: float | None
    evidence: str
    fix: str
    estimate: bool = False  # a prediction (GPU launches on a CPU run), not a measurement
    label: str = ""  # how the summary's "also" names it, when more than its cost

    def text(self) -> str:
        label = f"{self.cost} (estimate)" if self.estimate else str(self.cost)
        return f"{label}: {self.evidence}; {self.fix}"


@dataclasses.dataclass(frozen=True)
class Cores:
    """The cores a cell used: measured over its timed calls (`scanbench.probes.usage`), or,
    for results stored before, what the backend declared (one, or every core)."""

    count: float
    measured: bool
    contended: bool = False  # measured while other programs held the cores

    def text(self) -> str:
        count = f"{self.count:.1f} core{'s' * (round(self.count, 1) != 1.0)}"
        if not self.measured:
            return f"{count} (declared; threads not measured)"
        return count + (" (measured on a busy machine)" if self.contended else "")


@dataclasses.dataclass(frozen=True)
class Neighbour:
    """Another backend of the same table, compared with this one on their samples.

    Attributes:
        name: its label in the table.
        ratio: this backend's median / its median (above 1: it is faster).
        low, high: the `TIE_CONFIDENCE` bootstrap interval of that ratio.
        counts: {count: (this backend's, its)} of the counts in which the two differ.
        cores: (this backend's cores, its cores).
        same_program: the same program with other XLA flags.
    """

    name: str
    ratio: float
    low: float
    high: float
    counts: Mapping[str, tuple[float | None, float | None]] = dataclasses.field(
        default_factory=dict
    )
    cores: tuple[Cores, Cores] | None = None
    same_program: bool = False

    @property
    def per_core(self) -> float | None:
        """How many times less core time it takes per call (above 1: cheaper per core)."""
        if self.cores is None or self.cores[1].count <= 0:
            return None
        return self.ratio * self.cores[0].count / self.cores[1].count

    def interval(self) -> str:
        return f"{TIE_CONFIDENCE:.0%} interval {self.low:.2f}-{self.high:.2f}x"


@dataclasses.dataclass(frozen=True)
class Facts:
    """What the rules read (from a stored record, a report row or the Python API)."""

    median_s: float | None
    per_call: Mapping[str, float | None]  # `scanbench.counts.Counts.per_call`
    kernels_by_op: Mapping[str, float] = dataclasses.field(default_factory=dict)
    decomposition: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    costs: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # unit costs
    platform: str = "cpu"
    x_bandwidth: float | None = None
    x_roofline: float | None = None  # per core (the report's)
    memory: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # counts.memory
    bound_level: str | None = None  # the memory level x_bandwidth is measured against
    engine: str = "jax"  # what executes the backend: jax, numpy, numba, scipy, python
    # the faster backends of the same table to name, the first one first (`Neighbour`)
    faster: tuple[Neighbour, ...] = ()
    compilations: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # by function
    conversions: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # by kind, caller
    static: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # counts.static
    work: Mapping[str, float] = dataclasses.field(default_factory=dict)  # the scenario's units
    dtype: str = "float32"
    cores: Cores | None = None
    faults_per_call: float | None = None  # minor page faults of a timed call
    rates: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # environment.rates
    bound_bytes_per_s: float | None = None  # the copy bandwidth x_bandwidth is against
    python: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # counts.python
    reference: bool = False  # the scenario's roofline kernel: not diagnosed
    # the same loop without the waits in the same table, for a loop with waits
    without_waits: Neighbour | None = None


def cores_of(record: Any, cpu_count: int | None) -> Cores:
    """The cores a stored record's timed calls used (`Cores`)."""
    usage = dict(record.sampling or {}).get("usage") or {}
    if usage.get("cores") is not None:
        return Cores(float(usage["cores"]), True, bool(usage.get("contended")))
    parallel = record.parallel or record.strategy == "sharded"
    return Cores(float(cpu_count or 1) if parallel else 1.0, False)


def facts_of(record: Any, environment: Mapping[str, Any]) -> Facts | None:
    """What the rules read of a stored, counted and timed record (None otherwise); the
    distances to a limit and the neighbours come from the report (they need the run's
    other records). The decomposition follows `scanbench.decomposition`'s rules from the
    record's counts (`decomposition_of`)."""
    if record.status != "ok" or not record.counts or "median" not in record.stats:
        return None
    usage = dict(record.sampling or {}).get("usage") or {}
    return Facts(
        median_s=record.stats["median"],
        per_call=record.counts.per_call(),
        kernels_by_op=record.counts.breakdowns()["kernels_by_op"],
        decomposition=decomposition_of(record, environment),
        costs=dict(environment.get("overheads") or {}),
        platform=dict(record.device).get("platform") or environment.get("platform") or "cpu",
        memory=dict(record.counts.section("memory")),
        engine=record.engine,
        compilations=dict(record.counts.compilations),
        conversions=dict(record.counts.conversions),
        static=dict(record.counts.static),
        work=dict(record.work),
        dtype=record.dtype,
        cores=cores_of(record, environment.get("cpu_count")),
        faults_per_call=usage.get("faults_per_call"),
        rates=dict(environment.get("rates") or {}),
        python=dict(record.counts.section("python")),
        reference=record.strategy == "roofline",
    )


def _get(mapping: Mapping[str, Any], key: str) -> float:
    value = mapping.get(key)
    return 0.0 if value is None else float(value)


def _pct(fraction: float) -> str:
    """A share of the median (at most 100%: a part measured in the slower counted call
    can exceed the median it is divided by)."""
    return f"{min(fraction, 1.0):.0%}"


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
        f"see what {first.name} does differently",
        label=_neighbour_label(first),
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
    shown = [
        f"{COUNTS_NAMED.get(key, key)} {_count(mine)} vs {_count(theirs)}"
        for key, (mine, theirs) in neighbour.counts.items()
    ]
    if shown:
        text += "; " + "; ".join(shown)
    elif not neighbour.same_program:
        text += "; the same counts: its loop or layout"
    return text + ")"


def _neighbour_label(neighbour: Neighbour) -> str:
    cores = neighbour.cores
    on = f" on {cores[1].text()}" if cores is not None and _differ(*cores) else ""
    return f"{neighbour.name} {neighbour.ratio:.2f}x faster{on}"


def _differ(mine: Cores, theirs: Cores) -> bool:
    """Whether two cells ran on different numbers of cores (`CORES_DIFFER` or more apart)."""
    return abs(mine.count - theirs.count) >= CORES_DIFFER


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


SYNC_FIX = (
    "wait once, after the loop: let the host queue the calls ahead (no block_until_ready, "
    "float() or np.array() per step)"
)


def _sync(facts: Facts) -> Finding | None:
    """Explicit waits per item: the device-idle time inside them, or the measured
    difference to the same loop without them where the table has it."""
    waits = _get(facts.per_call, "waits")
    if waits < 2:
        return None
    by_function = facts.conversions.get("waits_by_function") or {}
    where = ", ".join(f"{name} {count:g}" for name, count in list(by_function.items())[:2])
    where = f" (in {where})" if where else ""
    if _untimed(facts):
        if waits < UNTIMED_COUNT:
            return None
        return Finding(
            Cost.SYNC,
            None,
            f"{waits:,.0f} waits per call{where} (a timed run gives their share)",
            SYNC_FIX,
        )
    sibling = facts.without_waits
    if sibling is not None:
        return _sync_against(facts, waits, where, sibling)
    if not _reliable(facts):
        return Finding(
            Cost.SYNC, None, f"{waits:,.0f} waits per call{where}{_unreliable(facts)}", SYNC_FIX
        )
    share = _get(facts.decomposition, "sync_fraction")
    if share < MINOR:
        return None
    return Finding(
        Cost.SYNC,
        share,
        f"{waits:,.0f} waits per call{where}{_wait_prices(facts, waits, share)}",
        SYNC_FIX,
    )


def _sync_against(facts: Facts, waits: float, where: str, sibling: Neighbour) -> Finding:
    """The waits priced by the same loop without them (`Facts.without_waits`)."""
    measured = f"the same loop without them, {sibling.name}, measured in this run"
    if sibling.low > 1.0:  # the loop without the waits is faster, the interval says
        share = 1.0 - 1.0 / sibling.ratio
        return Finding(
            Cost.SYNC,
            share,
            f"{waits:,.0f} waits per call{where} cost {_pct(share)} of the time: {measured}, "
            f"is {sibling.ratio:.2f}x faster ({sibling.interval()})",
            SYNC_FIX,
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
    )


def _wait_prices(facts: Facts, waits: float, share: float) -> str:
    """What the waits cost: the device-idle time inside them (or its upper bound, for
    records stored before it was measured), or the probe's price of one wait."""
    pending, counted = facts.conversions.get("pending_waits"), facts.conversions.get("waits")
    if facts.conversions.get("waited_s") is None or pending is None or not counted:
        cost = facts.costs.get("wait_s")
        each = f" x {cost * 1e6:.0f} us" if cost else ""
        return f"{each} = {_pct(share)} of the time"
    pending = waits * min(max(pending / counted, 0.0), 1.0)  # the counted calls, per call
    if facts.decomposition.get("sync_bound"):
        return (
            f", {pending:,.0f} of them on a value still being computed: the device sat idle "
            f"inside them for at most {_pct(share)} of the time (the traced call's idle share; "
            "stored before the idle time inside waits was measured)"
        )
    return (
        f", {pending:,.0f} of them on a value still being computed: the device sat idle "
        f"inside them for {_pct(share)} of the time"
    )


def _untimed(facts: Facts) -> bool:
    """No decomposition (a profile, not a timed run): rules fire on counts alone."""
    return not facts.decomposition


def _reliable(facts: Facts) -> bool:
    """Whether the traced shares (device, host, waits) describe the median (see
    `scanbench.decomposition`); results stored before the check count as reliable."""
    return bool(facts.decomposition.get("reliable", True))


def _unreliable(facts: Facts) -> str:
    """`` (the traced call took 6.0x the median: no traced share)`` when it did."""
    why = facts.decomposition.get("unreliable")
    return "" if _reliable(facts) or not why else f" ({why}: no traced share)"


def _dispatch(facts: Facts) -> Finding | None:
    dispatches = _get(facts.per_call, "dispatches")
    if _untimed(facts):
        if dispatches < UNTIMED_COUNT:
            return None
        return Finding(
            Cost.DISPATCH,
            None,
            f"{dispatches:,.0f} dispatches per call (a timed run gives their share)",
            "move the loop into lax.scan or vmap (one dispatch per call)",
        )
    share = _get(facts.decomposition, "dispatch_fraction")
    if dispatches <= 1 or share < MINOR:
        return None
    cost = facts.costs.get("dispatch_queued_s")
    each = f" x {cost * 1e6:.1f} us" if cost else ""
    return Finding(
        Cost.DISPATCH,
        share,
        f"{dispatches:,.0f} dispatches per call{each} = {_pct(share)} of the time",
        "move the loop into lax.scan or vmap (one dispatch per call)",
    )


def _small_executions(facts: Facts) -> Finding | None:
    dispatches = _get(facts.per_call, "dispatches")
    device = facts.decomposition.get("device_fraction")
    if _untimed(facts) or dispatches < MANY_DISPATCHES or not device or not facts.median_s:
        return None
    if not _reliable(facts):  # its share is the traced device share
        return None
    each = device * facts.median_s / dispatches
    if each >= SMALL_EXECUTION_S or device < MINOR:
        return None
    return Finding(
        Cost.SMALL_EXECUTIONS,
        device,
        f"{dispatches:,.0f} dispatches per call, each running {each * 1e6:,.0f} us of device "
        f"work on average ({_pct(device)} of the time in all)",
        "batch the items into one call (vmap over them) or move the loop into lax.scan, "
        "so that each launch does more work",
    )


def _transfer(facts: Facts) -> Finding | None:
    h2d = _get(facts.per_call, "h2d")
    conversions = _get(facts.per_call, "host_conversions")
    low = _get(facts.decomposition, "transfer_low_fraction")
    high = _get(facts.decomposition, "transfer_high_fraction")
    share = _get(facts.decomposition, "transfer_fraction")
    fix = (
        "keep values on the device inside the loop: no np.array(x), float(x) or Python "
        "scalars per step; convert once, outside"
    )
    if _untimed(facts):
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
    priced = _pct(share) if high - low < 0.01 else f"{_pct(low)}-{_pct(high)}"
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
    conversions = _get(facts.per_call, "host_conversions")
    if facts.platform == "gpu" or conversions < 1:
        return None
    floor = conversions * GPU_SYNC_S
    share = floor / facts.median_s if facts.median_s else None
    of_median = f" ({_pct(share)} of this median)" if share is not None else ""
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
    compiles = _get(facts.per_call, "compiles")
    traces = _get(facts.per_call, "traces")
    if compiles < 1 and traces < 1:
        return None
    share = None if _untimed(facts) else _get(facts.decomposition, "compile_fraction")
    timed = "" if share is None else f" = {_pct(share)} of the time"
    return Finding(
        Cost.RECOMPILE,
        share,
        f"{compiles:,.0f} compilations and {traces:,.0f} traces inside every call"
        f"{_why_recompiled(facts)}{timed}",
        "jit the function once, outside the loop, and call the jitted function; keep "
        "shapes and static arguments fixed",
    )


def _gpu_launch(facts: Facts) -> Finding | None:
    launches = _get(facts.per_call, "launch_equivalent")
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
        f"({_pct(share)} of this median)",
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


def _megabytes(count: float) -> str:
    return f"{count / 1e6:,.1f} MB"


def _temporaries(facts: Facts) -> Finding | None:
    temp, minimum = facts.memory.get("temp_bytes"), facts.memory.get("minimum_bytes")
    if not temp or not minimum or minimum < MEANINGFUL_MINIMUM_BYTES:
        return None
    if temp < TEMPORARIES_DOMINATE * minimum:
        return None
    named = list(facts.memory.get("temporaries") or [])[:3]
    largest = ", ".join(f"{t['instruction']} {_megabytes(t['bytes'])}" for t in named)
    return Finding(
        Cost.TEMPORARIES,
        None,
        f"XLA plans {_megabytes(temp)} of temporaries per call, {temp / minimum:.1f}x the "
        f"{_megabytes(minimum)} the work must hold" + (f" (largest: {largest})" if largest else ""),
        "keep per-step results out of the scan's stacked outputs (block the work so they "
        "stay small) and transpose outside the call",
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


@dataclasses.dataclass(frozen=True)
class Priced:
    """A count at a rate measured in the run: how long it takes, and what it was."""

    seconds: float
    text: str


def _flops_text(flops: float) -> str:
    for scale, unit in ((1e9, "GFLOP"), (1e6, "MFLOP"), (1e3, "kFLOP")):
        if flops >= scale:
            return f"{flops / scale:,.3g} {unit}"
    return f"{flops:,.0f} FLOP"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.3g} us"


def _operations(facts: Facts) -> tuple[float, str] | None:
    """(flops per call, where the count comes from), or None without one (module doc)."""
    if facts.engine == "jax":
        static = facts.static
        flops = static.get("flops") if static.get("available") else None
        if not flops:
            return None
        least = "at least " if static.get("custom_calls") else ""
        opaque = ", library calls not counted" if static.get("custom_calls") else ""
        return flops, f"{least}{_flops_text(flops)} (XLA's cost analysis, loops included{opaque})"
    flops = facts.work.get("flops")
    if not flops:
        return None
    return float(flops), f"{_flops_text(flops)} (declared by the scenario)"


def _arithmetic(facts: Facts) -> Priced | None:
    """The operation count at the run's measured arithmetic rate on the cell's cores."""
    counted = _operations(facts)
    table = (facts.rates.get("flops_per_s") or {}).get(facts.dtype)
    if counted is None or not table:
        return None
    flops, source = counted
    if "device" in table:
        rate, on = float(table["device"]), "the device"
    else:
        cores = facts.cores or Cores(1.0, False)
        one, every = float(table["one"]), float(table["all"])
        rate = min(one * max(cores.count, 1.0), max(every, one))
        on = cores.text()
    return Priced(
        flops / rate,
        f"the arithmetic, {source} at the measured {facts.dtype} FMA rate on {on} "
        f"({rate / 1e9:,.3g} GFLOP/s)",
    )


def _traffic(facts: Facts) -> list[Priced]:
    """The known traffic at the run's measured rates: the bytes the work must move at
    the bound's copy bandwidth, and the fresh pages the timed calls faulted in."""
    parts = []
    nbytes, bandwidth = facts.work.get("bytes"), facts.bound_bytes_per_s
    if nbytes and bandwidth:
        level = f" ({facts.bound_level})" if facts.bound_level else ""
        parts.append(
            Priced(
                nbytes / bandwidth,
                f"the {_megabytes(nbytes)} the work must move at the copy bandwidth{level}, "
                f"{bandwidth / 1e9:,.3g} GB/s",
            )
        )
    faults, fault_s = facts.faults_per_call, facts.rates.get("fault_s")
    if faults and faults >= 1 and fault_s:
        parts.append(
            Priced(
                faults * fault_s,
                f"{faults:,.0f} page faults per call on fresh memory x {fault_s * 1e6:.2g} us",
            )
        )
    return parts


def _of_median(facts: Facts, parts: Sequence[Priced]) -> str:
    median = facts.median_s or 0.0
    shown = "; ".join(f"{part.text}: {_ms(part.seconds)}" for part in parts)
    return f"{shown}, of a {_ms(median)} median"


def _memory(facts: Facts) -> Finding | None:
    """Memory-bound: the known traffic takes `MOST` of the median (module doc)."""
    parts = _traffic(facts)
    if not parts or not facts.median_s:
        return None
    share = sum(part.seconds for part in parts) / facts.median_s
    if share < MOST:
        return None
    fresh = len(parts) > 1 and parts[-1].seconds > parts[0].seconds
    fix = (
        "allocate the output (and any carry) once and write into it on every call (donate "
        "it, or keep it between calls): each fresh page costs a fault and a zero-fill"
        if fresh
        else "move fewer bytes: a smaller dtype, fewer passes over the data, passes fused"
    )
    takes = (
        f"the known traffic takes {_pct(share)} of the time"
        if share <= 1.0
        else f"the known traffic takes all of the time (its parts add up to {share:.0%} of "
        "the median: they overlap, or a rate was measured on a busier machine)"
    )
    return Finding(
        Cost.MEMORY,
        min(share, 1.0),
        f"{takes} at the rates measured in this run: {_of_median(facts, parts)}",
        fix,
    )


def _compute(facts: Facts) -> Finding | None:
    """Compute-bound: an operation count at the measured rate takes `MOST` of the
    median (module doc)."""
    priced = _arithmetic(facts)
    if priced is None or not facts.median_s:
        return None
    share = priced.seconds / facts.median_s
    if share < MOST:
        return None
    return Finding(
        Cost.COMPUTE,
        min(share, 1.0),
        f"{priced.text} takes {_ms(priced.seconds)}, {_pct(share)} of the {_ms(facts.median_s)} "
        "median",
        "fewer operations (a better algorithm), or a faster unit: a GPU, wider vectors",
    )


HOST_CODE = ("numpy", "scipy", "numba", "python")  # engines whose Python lines are counted


def _loop_of(facts: Facts) -> tuple[float, str] | None:
    """(iterations per call, where) of host code's hottest Python line, if counted."""
    hottest = list(facts.python.get("hottest") or [])
    if facts.engine not in HOST_CODE or not hottest:
        return None
    if facts.engine not in HOST_ENGINES and _get(facts.per_call, "dispatches") > 0:
        return None  # a function that is not jitted but calls JAX: its dispatches say it
    line = hottest[0]
    code = str(line.get("code", ""))
    code = code if len(code) <= 60 else code[:57] + "..."
    return float(line["count"]), f"{line.get('where')}: `{code}`"


def _host_loop(facts: Facts) -> Finding | None:
    """Host code in a Python loop of `MANY_DISPATCHES` or more iterations per call: its
    library calls' fixed cost, at least one per iteration at the measured cost of one."""
    loop = _loop_of(facts)
    if loop is None or loop[0] < MANY_DISPATCHES or not facts.median_s:
        return None
    iterations, where = loop
    each = facts.median_s / iterations
    call = facts.rates.get("numpy_call_s")
    evidence = f"a Python loop of {iterations:,.0f} iterations per call ({where}), {_ms(each)} each"
    share = None
    if call:
        share = min(iterations * call / facts.median_s, 1.0)
        evidence += (
            f"; one library call per iteration at the measured cost of a minimal NumPy call "
            f"({call * 1e6:.2g} us) is at least {_ms(iterations * call)}, {_pct(share)} of "
            "the time"
        )
    small = each < SMALL_EXECUTION_S
    fix = (
        "call the library once over the batch (a batched routine, or jax.vmap / lax.scan), "
        "not once per item"
        if small
        else "each iteration's calls do real work: what they spend it on is not counted "
        "(profile the host code: py-spy, perf)"
    )
    return Finding(Cost.HOST_LOOP, share, evidence, fix, label=f"host loop of {iterations:,.0f}")


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
    _far_from_limit,
    _memory,
    _compute,
    _host_loop,
)
WORK = (Cost.MEMORY, Cost.COMPUTE, Cost.HOST_LOOP)  # what the work itself spends time on


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
    overheads = [
        f
        for f in fired
        if f.share is not None and f.share >= MINOR and not f.estimate and f.cost not in WORK
    ]
    limit = _near_limit(facts)
    if limit is not None and not overheads and not neighbours:
        return (limit, *(f for f in fired if f.cost != Cost.MEMORY))  # the limit, said once
    timed = sorted(
        (f for f in fired if f.share is not None and not f.estimate),
        key=lambda f: -(f.share or 0.0),
    )
    rest = [f for f in fired if f not in timed]
    if timed and (timed[0].share or 0.0) >= DOMINANT:
        if timed[0].cost not in WORK:  # an overhead, not how XLA compiled
            rest = [f for f in rest if f.cost != Cost.FAR]
        return (timed[0], *neighbours, *timed[1:], *rest)
    if _untimed(facts) and rest:  # counts alone: the overheads present, by rule
        return (*neighbours, *rest)
    unknown = _the_rest(facts)
    if neighbours and unknown.cost == Cost.UNKNOWN:  # the neighbour is what is known
        return (*neighbours, *timed, *rest)
    return (*neighbours, unknown, *timed, *rest)


def _neighbours(facts: Facts) -> list[Finding]:
    """The first faster backend as a finding, the others as labels."""
    first = _faster(facts)
    if first is None:
        return []
    others = [
        Finding(Cost.FASTER, None, _neighbour_text(n), "", label=_neighbour_label(n))
        for n in facts.faster[1:]
    ]
    return [first, *others]


def _the_rest(facts: Facts) -> Finding:
    """When no rule dominates: host time of a JAX backend that no count explains (never
    "the work itself"), else what is not known and how to find out."""
    device = facts.decomposition.get("device_fraction")
    host = facts.decomposition.get("host_fraction")
    reliable = _reliable(facts)
    if facts.engine not in HOST_ENGINES and reliable and host is not None and host >= DOMINANT:
        return Finding(
            Cost.UNEXPLAINED,
            host,
            f"host {_pct(host)} of the time that no count explains (device {_pct(device or 0)}): "
            "Python between the calls, NumPy on the host, or waits the probes do not see",
            "look at the trace (`scanbench profile`): the host thread's events show where",
        )
    return _not_known(facts)


def _not_known(facts: Facts) -> Finding:
    """What was measured, what is not, and how to find out (module doc)."""
    device = facts.decomposition.get("device_fraction")
    host = facts.decomposition.get("host_fraction")
    if not _reliable(facts):
        where = f"no traced share: {facts.decomposition.get('unreliable')}"
    elif device is not None and host is not None:
        where = f"device {_pct(device)}, host {_pct(host)}"
    else:
        where = "the overheads counted are small"
    said = [f"no count explains the time ({where})"]
    loop = _loop_of(facts)
    if loop is not None and facts.median_s:
        iterations, line = loop
        said.append(
            f"a Python loop of {iterations:,.0f} iterations per call ({line}), "
            f"{_ms(facts.median_s / iterations)} each"
        )
    priced = [*_traffic(facts)]
    arithmetic = _arithmetic(facts)
    if arithmetic is not None:
        priced.append(arithmetic)
    if priced:
        said.append(f"at the rates measured in this run, {_of_median(facts, priced)}")
    missing = _missing(facts, arithmetic)
    if missing:
        said.append("not measured: " + ", ".join(missing))
    host_code = facts.engine in HOST_CODE
    fix = (
        "profile the host code (py-spy, perf): scanbench counts no operations inside it"
        if host_code
        else "find out with `scanbench profile`: the trace's kernels by op show where the "
        "device time goes"
    )
    return Finding(Cost.UNKNOWN, None, "; ".join(said), fix)


def _missing(facts: Facts, arithmetic: Priced | None) -> list[str]:
    """What a count or a rate is missing for (the not-known sentence)."""
    missing = []
    if arithmetic is None:
        if _operations(facts) is not None:
            missing.append("the arithmetic rate (not measured in this run)")
        elif facts.engine in HOST_CODE:
            missing.append("an operation count (the scenario declares no work()['flops'])")
        else:
            why = facts.static.get("operations_error")
            missing.append(
                "an operation count "
                + (f"({why})" if why else "(XLA's cost analysis: stored by newer runs)")
            )
    fresh = (facts.memory.get("measured") or {}).get("bytes")
    if facts.faults_per_call is None and fresh and fresh >= FRESH_MEMORY_BYTES:
        missing.append(
            f"the page faults of the {_megabytes(fresh)} one call allocates (memory probe) "
            "in the timed calls"
        )
    elif facts.faults_per_call and not facts.rates.get("fault_s"):
        missing.append("the cost of a page fault")
    if facts.cores is not None and not facts.cores.measured:
        missing.append("the cores it used (threads not measured)")
    return missing


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

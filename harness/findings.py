"""The vocabulary of the diagnosis: what its rules read (`Facts`), what they say (`Finding`
of a `Cost`), and how two cells compare (`Cores`, `Neighbour`).

Pure types and the few helpers the rules share; the rules themselves are in
`scanbench.diagnosis` (the overheads, the neighbours, the order of the findings) and
`scanbench.evidence` (what the work itself spends its time on).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

from .decomposition import decomposition_of
from .trace_route import UNNAMED, TraceRoute

MANY_DISPATCHES = 100  # dispatches (host-loop iterations) per call from which they count
SMALL_EXECUTION_S = 100e-6  # mean time per dispatch (or iteration) below which it is small
TIE_CONFIDENCE = 0.95  # a faster backend is named only when this interval excludes a tie
HOST_ENGINES = ("numpy", "numba", "scipy")  # host code: their host time is their own work


class Cost(enum.StrEnum):
    REFERENCE = "reference"
    NEAR_LIMIT = "near a limit"
    FASTER = "a faster backend"
    SYNC = "sync-bound"
    UNEXPLAINED = "unexplained host time"
    COMPUTE = "compute-bound"
    LATENCY = "latency-bound"
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
    CONSTANTS = "folded constants"
    LEAK = "live arrays grow"
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
    # the backend it names as the fix, measured in the same run (a faster backend; the
    # same loop without its waits): what applying the fix is predicted to gain
    neighbour: Neighbour | None = None

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


EXPLAINS = 0.5  # a difference that takes this share of the gap explains it
NAMED = 3  # differences named in a sentence, the largest first
# the change that removes each located cause: the rule's fix and the gap's, said once
FIXES = {
    Cost.DISPATCH: "move the loop into lax.scan or vmap (one dispatch per call)",
    Cost.TRANSFER: (
        "keep values on the device inside the loop: no np.array(x), float(x) or Python "
        "scalars per step; convert once, outside"
    ),
    Cost.SYNC: (
        "wait once, after the loop: let the host queue the calls ahead (no block_until_ready, "
        "float() or np.array() per step)"
    ),
    Cost.RECOMPILE: (
        "jit the function once, outside the loop, and call the jitted function; keep "
        "shapes and static arguments fixed"
    ),
}
# the causes the probes locate, and the overhead rule whose finding names them
LOCATED = {
    "dispatches": Cost.DISPATCH,
    "transfers": Cost.TRANSFER,
    "waits": Cost.SYNC,
    "compilations": Cost.RECOMPILE,
}


@dataclasses.dataclass(frozen=True)
class Difference:
    """One measured difference between a cell and its faster neighbour, priced.

    Attributes:
        mechanism: what differs (`LOCATED` keys, ``kernels``, ``fresh memory``,
            ``arithmetic``, ``host loop``, ``cores``).
        seconds: what it costs this cell per call more than the neighbour, as priced.
        share: the share of the gap it is given (at most what the larger ones left).
        text: the counts and the price.
        fix: the change that removes it.
    """

    mechanism: str
    seconds: float
    share: float
    text: str
    fix: str

    @property
    def located(self) -> bool:
        return self.mechanism in LOCATED


@dataclasses.dataclass(frozen=True)
class Gap:
    """The gap per call to a faster neighbour and what accounts for it."""

    seconds: float
    differences: tuple[Difference, ...]
    where: str = ""  # where the unexplained time is, when the trace says (device time)

    @property
    def explained(self) -> float:
        """The share of the gap the named differences account for (at most 1)."""
        return min(sum(d.share for d in self.differences), 1.0)

    @property
    def largest(self) -> Difference | None:
        return self.differences[0] if self.differences else None

    def text(self) -> str:
        """``of the 4.1 ms gap per call: 1,110 vs 3 kernels ... = 2.0 ms (49%); ...``."""
        where = f"; {self.where}" if self.where and self.explained < EXPLAINS else ""
        if not self.differences:
            return (
                f"no measured difference accounts for the {duration(self.seconds)} gap per "
                f"call{where}"
            )
        parts = [
            f"{d.text} = {duration(d.seconds)} ({d.share:.0%})" for d in self.differences[:NAMED]
        ]
        return f"of the {duration(self.seconds)} gap per call: " + "; ".join(parts) + where


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
        caveats: why the ratio may not hold: a cell measured on a disturbed machine, or
            on part of the work and scaled (``this backend's cell was disturbed``).
        ranged: ``low, high`` are the ratio of the two cells' sample ranges, not an
            interval: a side had too few samples for an exact interval of its median.
        gap: the measured differences that account for the gap (`scanbench.gap`).
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
    caveats: tuple[str, ...] = ()
    ranged: bool = False
    gap: Gap | None = None

    @property
    def per_core(self) -> float | None:
        """How many times less core time it takes per call (above 1: cheaper per core)."""
        if self.cores is None or self.cores[1].count <= 0:
            return None
        return self.ratio * self.cores[0].count / self.cores[1].count

    def interval(self) -> str:
        if self.ranged:
            return (
                f"samples' range {self.low:.2f}-{self.high:.2f}x: too few samples for a "
                f"{TIE_CONFIDENCE:.0%} interval"
            )
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
    # CPU seconds a timed call spent in the kernel, every thread's (None: not measured)
    system_per_call: float | None = None
    rates: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # environment.rates
    bound_bytes_per_s: float | None = None  # the copy bandwidth x_bandwidth is against
    python: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # counts.python
    # one call's host time by function (counts.host_calls, `scanbench.probes.host_calls`)
    host_calls: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    spans: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # counts.spans
    reference: bool = False  # the scenario's roofline kernel: not diagnosed
    chains: str | None = None  # how the backend runs dependent chains (Backend.chains)
    # the same loop without the waits in the same table, for a loop with waits
    without_waits: Neighbour | None = None
    # the call that writes a trace, from where the reader is, or the trace written
    trace_route: TraceRoute = UNNAMED


def cores_of(record: Any, cpu_count: int | None) -> Cores:
    """The cores a stored record's timed calls used (`Cores`)."""
    usage = dict(record.sampling or {}).get("usage") or {}
    if usage.get("cores") is not None:
        return Cores(float(usage["cores"]), True, bool(usage.get("contended")))
    parallel = record.parallel or record.strategy == "sharded"
    return Cores(float(cpu_count or 1) if parallel else 1.0, False)


def facts_of(
    record: Any, environment: Mapping[str, Any], trace_route: TraceRoute = UNNAMED
) -> Facts | None:
    """What the rules read of a stored, counted and timed record (None otherwise); the
    distances to a limit and the neighbours come from the report (they need the run's
    other records). The decomposition follows `scanbench.decomposition`'s rules from the
    record's counts (`decomposition_of`); ``trace_route``: how its reader gets a trace."""
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
        system_per_call=usage.get("system_per_call"),
        rates=dict(environment.get("rates") or {}),
        python=dict(record.counts.section("python")),
        host_calls=dict(record.counts.section("host_calls")),
        spans=dict(record.counts.spans),
        reference=record.strategy == "roofline",
        chains=record.chains,
        trace_route=trace_route,
    )


def number(mapping: Mapping[str, Any], key: str) -> float:
    value = mapping.get(key)
    return 0.0 if value is None else float(value)


def percent(fraction: float) -> str:
    """A share of the median (at most 100%: a part measured in the slower counted call
    can exceed the median it is divided by)."""
    return f"{min(fraction, 1.0):.0%}"


def duration(seconds: float) -> str:
    """``3.17 s``, ``25.1 ms``, ``4.2 us``: three significant digits in the unit that
    keeps them (a sentence never shows ``3.17e+03 ms``)."""
    if seconds >= 1.0:
        return f"{seconds:,.3g} s" if seconds < 1e3 else f"{seconds:,.0f} s"
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.3g} us"


def megabytes(count: float) -> str:
    return f"{count / 1e6:,.1f} MB"


def untimed(facts: Facts) -> bool:
    """No decomposition (a profile, not a timed run): rules fire on counts alone."""
    return not facts.decomposition


def reliable(facts: Facts) -> bool:
    """Whether the traced shares (device, host, waits) describe the median (see
    `scanbench.decomposition`); results stored before the check count as reliable."""
    return bool(facts.decomposition.get("reliable", True))


def unreliable(facts: Facts) -> str:
    """`` (the traced call took 6.0x the median: no traced share)`` when it did."""
    why = facts.decomposition.get("unreliable")
    return "" if reliable(facts) or not why else f" ({why}: no traced share)"

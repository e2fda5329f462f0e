"""What a cell's numbers say to change: the dominant cost, its evidence and its fix.

Pure rules over stored numbers (per-call counts, the time decomposition, the distance to
a limit), each one documented here and unit-tested on synthetic counts. A rule *fires*
when its evidence is present; a fired rule whose share of the median is at least
`DOMINANT` names the cell's dominant cost. Shares come from `scanbench.decomposition`
(counts x unit costs measured in the same run, device time from the trace).

- **near a limit**: the median is within `NEAR_LIMIT` of the memory-bandwidth bound
  (``x BW bound``: the bytes the work must move at the copy bandwidth measured in the run)
  or within `NEAR_ROOFLINE` of the scenario's roofline kernel (``x roofline``: the same
  arithmetic, hand-written, in the same run: a reachable limit, hence the tighter bound;
  the Numba MPPI run at 2.8x it still draws, weights and steps the plant), and no
  overhead rule below has a share of at least `MINOR`: nothing left to gain from the
  loop structure. The bandwidth bound assumes one perfect stream; a sweep with a
  dependency chain per system does not reach it (the best TDMA solvers measured here sit
  at 2.7-3.0x), hence 3.5x, not 1.x.
- **dispatch-bound**: more than one dispatch per call and dispatches x the measured cost
  of one are at least `MINOR` of the median: move the loop into ``lax.scan`` or ``vmap``.
- **many small executions**: at least `MANY_DISPATCHES` dispatches per call whose
  measured device time averages under `SMALL_EXECUTION_S` each: the device time is spent
  in launches too small to use the device (on CPU, the executor's per-kernel overhead on
  a few hundred lanes), not in work; its share is the device share. The sequential MPPI
  loop at `default`: 15,422 dispatches averaging ~30 us, 71% of the call, which the
  dispatch cost alone (8%) does not name. Batch the items into one call (``vmap``) or
  move the loop into ``lax.scan``.
- **transfer-bound**: host<->device round trips per call (H2D transfers and host
  conversions such as ``np.array(x)`` or ``float(x)``) priced by path (a range when the path
  is unknown; its middle is the share): keep values on the device inside the loop.
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
  `MEANINGFUL_MINIMUM_BYTES`), naming the largest: memory, not time (no share), e.g. the
  forward scan's stacked primes, 2 x n x batch floats. Keep per-step results out of the
  scan's stacked outputs (block the work so they stay small) or transpose outside the call.
- **far from its limit**: a JAX backend at more than `FAR_FROM_LIMIT` x the scenario's
  roofline kernel or its memory bound, and no overhead dominates (a dispatch-bound loop
  needs the loop moved, not other options): besides the code, XLA's options decide how it is
  compiled (the MPPI rollouts run 1.5x faster with XLA:CPU's multi-output fusion); no
  share, a suggestion: ``scanbench flags`` measures the curated options for the platform
  against the cell's current ones, in paired blocks.
- **no dominant overhead**: nothing above reaches `DOMINANT`: the time is the work itself
  (the device and host shares say where it runs).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from typing import Any

DOMINANT = 0.20  # a share of the median at least this names the dominant cost
MINOR = 0.05  # below this a cost is not worth naming
NEAR_LIMIT = 1.5  # within 1.5x of the copy bandwidth of the working set's level (see above)
NEAR_ROOFLINE = 1.5  # within 1.5x of the roofline kernel (see above)
TEMPORARIES_DOMINATE = 0.5  # XLA temporaries / the work's minimum from which they are named
MEANINGFUL_MINIMUM_BYTES = 2**20  # below this (MPPI's 56-byte inputs) no ratio means much
MANY_DISPATCHES = 100  # dispatches per call from which their size is looked at
SMALL_EXECUTION_S = 100e-6  # mean device time per dispatch below which it is small
UNTIMED_COUNT = 10  # without a decomposition (scanbench profile): this many per call fire
FASTER_BY = 1.3  # a backend of the same table this much faster is named
FAR_FROM_LIMIT = 2.0  # a JAX cell this far from its roofline or memory bound: try XLA options
HOST_ENGINES = ("numpy", "numba", "scipy")  # host code: their host time is the work
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
    NEAR_LIMIT = "near a limit"
    FASTER = "a faster backend"
    SYNC = "sync-bound"
    UNEXPLAINED = "unexplained host time"
    COMPUTE = "compute-bound"
    DISPATCH = "dispatch-bound"
    SMALL_EXECUTIONS = "many small executions"
    TRANSFER = "transfer-bound"
    RECOMPILE = "recompiling"
    GPU_LAUNCH = "launch-bound on a GPU"
    GPU_SYNC = "host syncs on a GPU"
    LAYOUT = "layout"
    TEMPORARIES = "temporaries"
    FAR = "far from its limit"
    NONE = "no dominant overhead"


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
class Facts:
    """What the rules read (from a stored record, a report row or the Python API)."""

    median_s: float | None
    per_call: Mapping[str, float | None]  # `scanbench.counts.Counts.per_call`
    kernels_by_op: Mapping[str, float] = dataclasses.field(default_factory=dict)
    decomposition: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    costs: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # unit costs
    platform: str = "cpu"
    x_bandwidth: float | None = None
    x_roofline: float | None = None
    memory: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # counts.memory
    bound_level: str | None = None  # the memory level x_bandwidth is measured against
    engine: str = "jax"  # what executes the backend: jax, numpy, numba, scipy, python
    # (backend, how many times faster, {count: (this backend's, its)}) of the fastest
    # backend of the same table on the same cores (one, or every one) that does the same
    # work >= `FASTER_BY` x faster
    faster: tuple[str, float, Mapping[str, tuple[float | None, float | None]]] | None = None
    compilations: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # by function
    conversions: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # by kind, caller
    static: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # counts.static


def facts_of(record: Any, environment: Mapping[str, Any]) -> Facts | None:
    """What the rules read of a stored, counted and timed record (None otherwise); the
    distances to a limit come from the report (they need the run's other records)."""
    if record.status != "ok" or not record.counts or "median" not in record.stats:
        return None
    return Facts(
        median_s=record.stats["median"],
        per_call=record.counts.per_call(),
        kernels_by_op=record.counts.breakdowns()["kernels_by_op"],
        decomposition=dict(record.decomposition),
        costs=dict(environment.get("overheads") or {}),
        platform=dict(record.device).get("platform") or environment.get("platform") or "cpu",
        memory=dict(record.counts.section("memory")),
        engine=record.engine,
        compilations=dict(record.counts.compilations),
        conversions=dict(record.counts.conversions),
        static=dict(record.counts.static),
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
        (facts.x_roofline, "the roofline kernel", NEAR_ROOFLINE),
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
    """Another backend of the same table does the same work at least `FASTER_BY` x
    faster: named, with the counts in which the two differ."""
    if facts.faster is None:
        return None
    name, ratio, counts = facts.faster
    shown = [
        f"{COUNTS_NAMED.get(key, key)} {_count(mine)} vs {_count(theirs)}"
        for key, (mine, theirs) in counts.items()
    ]
    differs = f" ({'; '.join(shown)})" if shown else " (with the same counts: its loop or layout)"
    return Finding(
        Cost.FASTER,
        None,
        f"{name} does the same work {ratio:.1f}x faster{differs}",
        f"see what {name} does differently",
        label=f"{name} {ratio:.1f}x faster",
    )


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _sync(facts: Facts) -> Finding | None:
    """Explicit waits per item: each stops the host from queueing the next call while the
    device runs the last, and sleeps until woken."""
    waits = _get(facts.per_call, "waits")
    if waits < 2:
        return None
    by_function = facts.conversions.get("waits_by_function") or {}
    where = ", ".join(f"{name} {count:g}" for name, count in list(by_function.items())[:2])
    where = f" (in {where})" if where else ""
    fix = (
        "wait once, after the loop: let the host queue the calls ahead (no "
        "block_until_ready, float() or np.array() per step)"
    )
    if _untimed(facts):
        if waits < UNTIMED_COUNT:
            return None
        return Finding(
            Cost.SYNC,
            None,
            f"{waits:,.0f} waits per call{where} (a timed run gives their share)",
            fix,
        )
    share = _get(facts.decomposition, "sync_fraction")
    if share < MINOR:
        return None
    return Finding(
        Cost.SYNC,
        share,
        f"{waits:,.0f} waits per call{where}{_wait_prices(facts, waits, share)}",
        fix,
    )


def _wait_prices(facts: Facts, waits: float, share: float) -> str:
    """What the waits cost: measured in the counted call (how many found their value
    still being computed, the share of the time inside them), or, for older records, the
    probe's price of one wait."""
    pending, counted = facts.conversions.get("pending_waits"), facts.conversions.get("waits")
    if facts.conversions.get("waited_s") is None or pending is None or not counted:
        cost = facts.costs.get("wait_s")
        each = f" x {cost * 1e6:.0f} us" if cost else ""
        return f"{each} = {_pct(share)} of the time"
    pending = waits * min(max(pending / counted, 0.0), 1.0)  # the counted calls, per call
    return (
        f", {pending:,.0f} of them on a value still being computed: the host spent "
        f"{_pct(share)} of the time inside them"
    )


def _untimed(facts: Facts) -> bool:
    """No decomposition (a profile, not a timed run): rules fire on counts alone."""
    return not facts.decomposition


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
            (facts.x_roofline, "the roofline kernel"),
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
    _far_from_limit,
)


def diagnose(facts: Facts) -> tuple[Finding, ...]:
    """Every fired rule, the dominant cost first (see the module doc); a cell with none
    says so, with where its time runs. A faster backend of the same table is named
    right after the dominant cost, and nothing is "near a limit" beside one."""
    fired = [finding for rule in RULES if (finding := rule(facts)) is not None]
    faster = _faster(facts)
    overheads = [f for f in fired if f.share is not None and f.share >= MINOR and not f.estimate]
    limit = _near_limit(facts)
    if limit is not None and not overheads and faster is None:
        return (limit, *fired)
    timed = sorted(
        (f for f in fired if f.share is not None and not f.estimate),
        key=lambda f: -(f.share or 0.0),
    )
    rest = [f for f in fired if f not in timed]
    neighbour = [faster] if faster is not None else []
    if timed and (timed[0].share or 0.0) >= DOMINANT:  # an overhead, not how XLA compiled
        rest = [f for f in rest if f.cost != Cost.FAR]
        return (timed[0], *neighbour, *timed[1:], *rest)
    if _untimed(facts) and rest:  # counts alone: the overheads present, by rule
        return (*neighbour, *rest)
    return (*neighbour, _the_rest(facts), *timed, *rest)


def _the_rest(facts: Facts) -> Finding:
    """When no overhead dominates: host time of a JAX backend that no count explains
    (never "the work itself"), else the work itself: compute-bound when the memory bound
    is known and far, or no dominant overhead."""
    device = facts.decomposition.get("device_fraction")
    host = facts.decomposition.get("host_fraction")
    if facts.engine not in HOST_ENGINES and host is not None and host >= DOMINANT:
        return Finding(
            Cost.UNEXPLAINED,
            host,
            f"host {_pct(host)} of the time that no count explains (device {_pct(device or 0)}): "
            "Python between the calls, NumPy on the host, or waits the probes do not see",
            "look at the trace (`scanbench profile`): the host thread's events show where",
        )
    where = (
        f"device {_pct(device)}, host {_pct(host)}"
        if device is not None and host is not None
        else "the overheads counted are small"
    )
    ratio = facts.x_bandwidth
    if ratio is not None and ratio == ratio and ratio > NEAR_LIMIT:
        level = f" ({facts.bound_level})" if facts.bound_level else ""
        return Finding(
            Cost.COMPUTE,
            None,
            f"no overhead counted ({where}) and {ratio:.2f}x the memory bound{level}: "
            "the arithmetic or a dependency chain takes the time",
            "fewer operations, a better algorithm or layout for the vector units; the "
            "roofline column, where there is one, says how far the arithmetic's limit is",
        )
    return Finding(Cost.NONE, None, where, "the time is the work itself")


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

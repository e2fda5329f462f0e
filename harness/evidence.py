"""What the work itself spends its time on, from counts at rates measured in the run.

The rules of `scanbench.diagnosis` that name a cause rather than an overhead, each only
with its evidence (the module doc of `scanbench.diagnosis` states them):

- **memory-bound**: the known traffic (the bytes the work must move at the bound's copy
  bandwidth, the fresh page faults of the timed calls x the cost of one) takes `MOST` of
  the median;
- **compute-bound**: an operation count (XLA's cost analysis with every loop's trip
  count, or the scenario's ``work()["flops"]`` for host code) at the measured arithmetic
  rate on the cores the cell used takes `MOST` of the median;
- **latency-bound**: a backend that runs the scenario's dependent chains one after
  another (``Backend.chains == "serial"``): the chains' steps at the measured latency of
  one step (`scanbench.probes.rates`, ``chain_step_s``), over the cores the cell used,
  take `MOST` of the median;
- **host loop**: host code's Python loop of `MANY_DISPATCHES` or more iterations per
  call, with iterations x the measured cost of a minimal library call;
- **not known**: what was measured, what was not, and how to find out.

Times that overlap the device share (traffic, arithmetic) are cited in milliseconds
beside the median, never as shares summed with it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .findings import (
    HOST_ENGINES,
    MANY_DISPATCHES,
    SMALL_EXECUTION_S,
    Cores,
    Cost,
    Facts,
    Finding,
    duration,
    megabytes,
    number,
    percent,
    reliable,
)

MOST = 0.5  # a count x a measured rate that takes this much of the median names the cause
FRESH_MEMORY_BYTES = 32 * 2**20  # glibc maps a buffer this large afresh on every allocation
HOST_CODE = ("numpy", "scipy", "numba", "python")  # engines whose Python lines are counted


@dataclasses.dataclass(frozen=True)
class Priced:
    """A count at a rate measured in the run: how long it takes, and what it was."""

    seconds: float
    text: str


def flops_text(flops: float) -> str:
    for scale, unit in ((1e9, "GFLOP"), (1e6, "MFLOP"), (1e3, "kFLOP")):
        if flops >= scale:
            return f"{flops / scale:,.3g} {unit}"
    return f"{flops:,.0f} FLOP"


def operations(facts: Facts) -> tuple[float, str] | None:
    """(flops per call, where the count comes from), or None without one (module doc)."""
    if facts.engine == "jax":
        static = facts.static
        flops = static.get("flops") if static.get("available") else None
        if not flops:
            return None
        least = "at least " if static.get("custom_calls") else ""
        opaque = ", library calls not counted" if static.get("custom_calls") else ""
        return flops, f"{least}{flops_text(flops)} (XLA's cost analysis, loops included{opaque})"
    flops = facts.work.get("flops")
    if not flops:
        return None
    return float(flops), f"{flops_text(flops)} (declared by the scenario)"


def arithmetic(facts: Facts) -> Priced | None:
    """The operation count at the run's measured arithmetic rate on the cell's cores."""
    counted = operations(facts)
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


BASE_PAGE = "base page"  # the only fault price the faults are multiplied by


HUGE_FAULT_BYTES = 2**20  # fresh bytes per fault from which a cell's faults are huge pages


def fault_kind(facts: Facts) -> str:
    """``huge page`` where the bytes one call allocates (memory probe) over its faults
    are a megabyte or more and the run priced a huge page's fault, else ``base page``."""
    fresh = (facts.memory.get("measured") or {}).get("bytes")
    faults = facts.faults_per_call
    huge = facts.rates.get("fault_huge_s")
    if huge and fresh and faults and faults >= 1 and fresh / faults >= HUGE_FAULT_BYTES:
        return "huge page"
    return BASE_PAGE


def fault_price(facts: Facts) -> float | None:
    """The run's price of one of the cell's fresh-page faults, of the kind it took
    (`fault_kind`); only a price of a known kind (a price of the older mixed-page probe
    overstates a base page's 4-5x: not used, not known)."""
    if facts.rates.get("fault_kind") != BASE_PAGE:
        return None
    if fault_kind(facts) == "huge page":
        return facts.rates.get("fault_huge_s")
    return facts.rates.get("fault_s")


def fault_cores(facts: Facts) -> float:
    """The cores the timed calls' faults are spread over: the measured cores (two threads
    fault at once, an assumption said where it is used), else one."""
    return max(facts.cores.count if facts.cores and facts.cores.measured else 1.0, 1.0)


def origin(facts: Facts) -> tuple[str, str]:
    """Where a cell's fresh bytes come from, and the fix that removes them: its output,
    XLA's copies, or other XLA temporaries (the compiled program's buffer assignment)."""
    memory = facts.memory
    output = float(memory.get("output_bytes") or 0)
    temporaries = list(memory.get("temporaries") or ())
    copies = sum(
        float(t.get("bytes", 0))
        for t in temporaries
        if t.get("opcode") == "copy" or "copy" in str(t.get("instruction", "")).split("_")
    )
    other = max(float(memory.get("temp_bytes") or 0) - copies, 0.0)
    origins = {
        "output": (
            output,
            f"its {megabytes(output)} output, fresh on every call",
            "allocate the output once and donate it (or keep it between calls)",
        ),
        "copies": (
            copies,
            f"XLA's copies ({megabytes(copies)})",
            "avoid the copies: pass the inputs in the layout the program reads, and donate "
            "the inputs the program may overwrite",
        ),
        "temporaries": (
            other,
            f"XLA temporaries ({megabytes(other)})",
            "keep per-step results out of the scan's stacked outputs (block the work so "
            "the temporaries stay small)",
        ),
    }
    name = max(origins, key=lambda key: origins[key][0])
    return origins[name][1], origins[name][2]


def _bytes_part(facts: Facts) -> Priced | None:
    """The bytes the work must move, at the bound's copy bandwidth."""
    nbytes, bandwidth = facts.work.get("bytes"), facts.bound_bytes_per_s
    if not (nbytes and bandwidth):
        return None
    level = f" ({facts.bound_level})" if facts.bound_level else ""
    return Priced(
        nbytes / bandwidth,
        f"the {megabytes(nbytes)} the work must move at the copy bandwidth{level}, "
        f"{bandwidth / 1e9:,.3g} GB/s",
    )


def fault_seconds(facts: Facts, faults: float) -> tuple[float, str] | None:
    """``faults`` fresh-page faults per call priced: at their kind's price (a base
    page's is a floor, `fault_kind`), capped by the CPU time the call measured in the
    kernel (a fault is handled there: a ceiling), over the cores the cell used; the
    seconds and what was assumed."""
    price = fault_price(facts)
    if not (faults >= 1 and price):
        return None
    kind = fault_kind(facts)
    floor = ": a floor" if kind == BASE_PAGE else ""
    each = f"{price * 1e6:.2g}" if price < 100e-6 else f"{price * 1e6:,.0f}"
    seconds, said = faults * price, f"x {each} us (a {kind}'s{floor})"
    kernel = facts.system_per_call  # 0: below the kernel clock's resolution, not a reading
    if kernel and kernel < seconds:
        seconds = kernel
        said += f", capped at the {duration(kernel)} the call spent in the kernel"
    cores = fault_cores(facts)
    if cores >= 1.05:
        said += f" over the {cores:.1f} cores it used (their faults taken at once: assumed)"
    return seconds / cores, said


def _faults_part(facts: Facts) -> Priced | None:
    """The timed calls' fresh-page faults at their kind's price, over the cell's cores
    (`fault_seconds`)."""
    faults = facts.faults_per_call
    priced = fault_seconds(facts, faults) if faults else None
    if priced is None:
        return None
    return Priced(priced[0], f"{faults:,.0f} page faults per call on fresh memory {priced[1]}")


def traffic(facts: Facts) -> list[Priced]:
    """The known traffic at the run's measured rates: the bytes the work must move at
    the bound's copy bandwidth, and the fresh pages the timed calls faulted in (at
    their kind's price, over the cores the cell used: `fault_seconds`)."""
    return [part for part in (_bytes_part(facts), _faults_part(facts)) if part is not None]


def of_median(facts: Facts, parts: Sequence[Priced]) -> str:
    median = facts.median_s or 0.0
    shown = "; ".join(f"{part.text}: {duration(part.seconds)}" for part in parts)
    return f"{shown}, of a {duration(median)} median"


def memory_bound(facts: Facts) -> Finding | None:
    """Memory-bound: the known traffic takes `MOST` of the median (module doc)."""
    parts = traffic(facts)
    if not parts or not facts.median_s:
        return None
    share = sum(part.seconds for part in parts) / facts.median_s
    if share < MOST:
        return None
    faults, moved = _faults_part(facts), _bytes_part(facts)
    if faults is not None and (moved is None or faults.seconds > moved.seconds):
        where, fix = origin(facts)
        fix = f"{fix} (most fresh bytes: {where}; each fresh page costs a fault and a zero-fill)"
    else:
        fix = "move fewer bytes: a smaller dtype, fewer passes over the data, passes fused"
    takes = (
        f"the known traffic takes {percent(share)} of the time"
        if share <= 1.0
        else f"the known traffic takes all of the time (its parts add up to {share:.0%} of "
        "the median: they overlap, or a rate was measured on a busier machine)"
    )
    return Finding(
        Cost.MEMORY,
        min(share, 1.0),
        f"{takes} at the rates measured in this run: {of_median(facts, parts)}",
        fix,
    )


EXCESS_OPERATIONS = 1.5  # counted / needed arithmetic from which the excess is said


def compute_bound(facts: Facts) -> Finding | None:
    """Compute-bound: an operation count at the measured rate takes `MOST` of the
    median (module doc)."""
    priced = arithmetic(facts)
    if priced is None or not facts.median_s:
        return None
    share = priced.seconds / facts.median_s
    if share < MOST:
        return None
    evidence = (
        f"{priced.text} takes {duration(priced.seconds)}, {percent(share)} of the "
        f"{duration(facts.median_s)} median"
    )
    fix = "fewer operations (a better algorithm), or a faster unit: a GPU, wider vectors"
    # the roofline kernel does the scenario's arithmetic at no more than the measured
    # rate: this count takes share x (x roofline) times its core time, so the program
    # runs at least that many times the operations the work needs
    excess = share * facts.x_roofline if facts.x_roofline else 0.0
    if excess >= EXCESS_OPERATIONS:
        evidence += (
            f"; that is at least {excess:.1f}x the arithmetic the roofline kernel needs for "
            f"the same work (this share x its {facts.x_roofline:.2f}x roofline per core)"
        )
        fix = (
            f"fewer operations: XLA's program runs at least {excess:.1f}x the operations "
            "the work needs; look for work the loop body repeats (recomputed terms, "
            "unused branches computed, a larger dtype) before a faster unit"
        )
    return Finding(Cost.COMPUTE, min(share, 1.0), evidence, fix)


CHAIN_FIX = (
    "interleave independent chains: sweep several systems in one inner loop (systems "
    "innermost: a time-major layout, or vectorised across systems), so that each step's "
    "latency hides behind the other systems' steps"
)
CHAIN_MARGIN = 1.1  # a floor this far above the median: the chains were not serial


def chain_floor(facts: Facts) -> Priced | None:
    """A serial backend's dependent chains (``work()["chains"]``, ``["chain_steps"]``,
    the steps of all chains) at the run's measured latency of one step, over the cores
    the cell used (at most one chain per core at a time): no core runs one chain's steps
    faster. None for a backend that interleaves its chains or did not declare it."""
    if facts.chains != "serial":
        return None
    chains, steps = facts.work.get("chains"), facts.work.get("chain_steps")
    step = (facts.rates.get("chain_step_s") or {}).get(facts.dtype)
    if not (chains and steps and step):
        return None
    cores = min(max(facts.cores.count if facts.cores else 1.0, 1.0), float(chains))
    on = facts.cores.text() if facts.cores else "1 core"
    return Priced(
        steps * step / cores,
        f"{chains:,.0f} dependent chains of {steps / chains:,.0f} steps, run one after "
        f"another (declared) on {on}, at the measured {step * 1e9:.2g} ns a step "
        f"({facts.dtype} x = c / (b - a x), each step waiting for the last)",
    )


def latency_bound(facts: Facts) -> Finding | None:
    """Latency-bound: a serial backend's chain floor takes `MOST` of the median (module
    doc). A floor above `CHAIN_MARGIN` x the median says the chains were not run one
    after another: no finding (the bundled declarations are tested against it)."""
    priced = chain_floor(facts)
    if priced is None or not facts.median_s:
        return None
    share = priced.seconds / facts.median_s
    if share < MOST or share > CHAIN_MARGIN:
        return None
    return Finding(
        Cost.LATENCY,
        min(share, 1.0),
        f"{priced.text} take {duration(priced.seconds)}, {percent(share)} of the "
        f"{duration(facts.median_s)} median",
        CHAIN_FIX,
    )


def loop_of(facts: Facts) -> tuple[float, str] | None:
    """(iterations per call, where) of host code's hottest Python line, if counted."""
    hottest = list(facts.python.get("hottest") or [])
    if facts.engine not in HOST_CODE or not hottest:
        return None
    if facts.engine not in HOST_ENGINES and number(facts.per_call, "dispatches") > 0:
        return None  # a function that is not jitted but calls JAX: its dispatches say it
    line = hottest[0]
    if str(line.get("where", "")).startswith("<"):
        return None  # generated code (Numba's `<string>`): compiled code, not a Python loop
    if line.get("count") is None:
        return None  # counted at a few sizes and not linear along count_along: no number
    code = str(line.get("code", ""))
    code = code if len(code) <= 60 else code[:57] + "..."
    return float(line["count"]), f"{line.get('where')}: `{code}`"


def host_loop(facts: Facts) -> Finding | None:
    """Host code in a Python loop of `MANY_DISPATCHES` or more iterations per call: its
    library calls' fixed cost, at least one per iteration at the measured cost of one."""
    loop = loop_of(facts)
    if loop is None or loop[0] < MANY_DISPATCHES:
        return None
    iterations, where = loop
    if not facts.median_s:  # counts alone (scanbench profile)
        return Finding(
            Cost.HOST_LOOP,
            None,
            f"a Python loop of {iterations:,.0f} iterations per call ({where}; a timed run "
            "gives its time per iteration)",
            "call the library once over the batch, not once per item",
            label=f"host loop of {iterations:,.0f}",
        )
    each = facts.median_s / iterations
    call = facts.rates.get("numpy_call_s")
    evidence = (
        f"a Python loop of {iterations:,.0f} iterations per call ({where}), {duration(each)} each"
    )
    share = None
    if call:
        share = min(iterations * call / facts.median_s, 1.0)
        evidence += (
            f"; one library call per iteration at the measured cost of a minimal NumPy call "
            f"({call * 1e6:.2g} us) is at least {duration(iterations * call)}, {percent(share)} of "
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


def not_known(facts: Facts) -> Finding:
    """What was measured, what is not, and how to find out (module doc)."""
    device = facts.decomposition.get("device_fraction")
    host = facts.decomposition.get("host_fraction")
    if not reliable(facts):
        where = f"no traced share: {facts.decomposition.get('unreliable')}"
    elif device is not None and host is not None:
        where = f"device {percent(device)}, host {percent(host)}"
    else:
        where = "the overheads counted are small"
    said = [f"no count explains the time ({where})"]
    loop = loop_of(facts)
    if loop is not None and facts.median_s:
        iterations, line = loop
        said.append(
            f"its hottest Python line runs once per call ({line})"
            if iterations <= 1  # one call into the library: no loop to name
            else f"a Python loop of {iterations:,.0f} iterations per call ({line}), "
            f"{duration(facts.median_s / iterations)} each"
        )
    priced = [*traffic(facts)]
    computed = arithmetic(facts)
    if computed is not None:
        priced.append(computed)
    chained = chain_floor(facts)
    if chained is not None:
        priced.append(chained)
    if priced:
        said.append(f"at the rates measured in this run, {of_median(facts, priced)}")
    absent = missing(facts, computed)
    if absent:
        said.append("not measured: " + ", ".join(absent))
    host_code = facts.engine in HOST_CODE
    fix = (
        "profile the host code (py-spy, perf): scanbench counts no operations inside it"
        if host_code
        else f"{facts.trace_route.find_out()}: the trace's kernels by op show where the "
        "device time goes"
    )
    return Finding(Cost.UNKNOWN, None, "; ".join(said), fix)


def missing(facts: Facts, computed: Priced | None) -> list[str]:
    """What a count or a rate is missing for (the not-known sentence)."""
    missing = []
    if computed is None:
        if operations(facts) is not None:
            missing.append("the arithmetic rate (not measured in this run)")
        elif facts.engine in HOST_CODE:
            missing.append("an operation count (work()['flops'] not given)")
        else:
            why = (facts.static.get("operations_error") or "").split("\n", 1)[0]  # a line
            missing.append(
                "an operation count "
                + (f"({why})" if why else "(XLA's cost analysis: stored by newer runs)")
            )
    fresh = (facts.memory.get("measured") or {}).get("bytes")
    if facts.faults_per_call is None and fresh and fresh >= FRESH_MEMORY_BYTES:
        missing.append(
            f"the page faults of the {megabytes(fresh)} one call allocates (memory probe) "
            "in the timed calls"
        )
    elif facts.faults_per_call and not facts.rates.get("fault_s"):
        missing.append("the cost of a page fault")
    elif facts.faults_per_call and fault_price(facts) is None:
        missing.append(
            "a base page's fault price (this run stored a price of the older mixed-page "
            "probe, which overstates a base page's 4-5x: run again to price the faults)"
        )
    if facts.cores is not None and not facts.cores.measured:
        missing.append("the cores it used (threads not measured)")
    return missing

"""Host code's part of a faster neighbour's gap (`scanbench.gap`): a Python loop's
iterations, host code between a JAX loop's device calls, a host engine's calls into each
library, and JAX's own eager calls and conversions made from host code, each priced from
the run's host profile (`scanbench.probes.host_calls`) or its trace (see `scanbench.gap`'s
module doc for the rules)."""

from __future__ import annotations

from .evidence import HOST_CODE, loop_of
from .findings import Difference, Facts, duration, number, reliable

# calls that run a compiled program: their profiled time holds the program's, not host code
PROGRAM_CALLS = ("Compiled.__call__", "PjitFunction.__call__")


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


def host_loop(mine: Facts, theirs: Facts) -> Difference | None:
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


def between_calls(mine: Facts, theirs: Facts) -> Difference | None:
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


def library_fix(package: str) -> str:
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


def eager_jax(mine: Facts, theirs: Facts) -> dict[str, float]:
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


def eager_text(facts: Facts, conversions: bool) -> str:
    """``ArrayImpl.__float__ x256 ~2.17 ms`` of the JAX functions of one kind."""
    shown = [
        f"{_short(name)} x{calls} ~{duration(seconds)}"
        for name, seconds, calls in _library_calls(facts).get("jax", ())
        if _is_conversion(name) == conversions and not name.endswith(PROGRAM_CALLS)
    ]
    return ", ".join(shown[:3])


def host_libraries(mine: Facts, theirs: Facts) -> list[Difference]:
    """Host code's time in each library it calls (one profiled call, scaled to the
    median) above the neighbour's time in the same library (none where it calls none on
    the host): for host engines, whose host time is their work; a JAX loop's host time
    is `between_calls`', and where that is not known (its traced call not reliable),
    its calls into libraries other than JAX (a JAX call's time holds its program's)."""
    skip: tuple[str, ...] = ()
    if mine.engine not in HOST_CODE:
        if between_calls(mine, theirs) is not None or number(mine.per_call, "dispatches") < 2:
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
                library_fix(package),
            )
        )
    return found


def own_code(facts: Facts) -> str:
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

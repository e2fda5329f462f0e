"""Arithmetic per call from XLA's own cost analysis, with every loop's trip count.

XLA's ``HloCostAnalysis`` (``compiled.cost_analysis()``) counts the floating-point
operations, transcendentals and bytes accessed of an executable, but a ``while`` loop's
body and condition only once, whatever its trip count: a scan of 100 steps reports the
flops of one step. So the count is made per computation:

- the executable's optimized HLO (``compiled.as_text()``) is parsed for its ``while``
  loops (`scanbench.probes.hlo.parse`), through ``call`` and ``conditional`` instructions
  (XLA:CPU wraps a loop it runs natively in a ``call``), each with its
  ``known_trip_count`` and the loops it is nested in;
- XLA's cost analysis is run on the module as compiled, and once per loop on the same
  module with the loop's body (and its condition) made the entry computation: the
  *inclusive* cost of one iteration, its nested loops counted once;
- the exact total is then the module's cost plus, for every loop L,
  ``exclusive(L) x (P(L) - 1)``, where ``P(L)`` is the product of the trip counts of L
  and of the loops around it and ``exclusive(L)`` is one iteration's cost without its
  nested loops (whose own correction adds them).

A sharded program is compiled as one SPMD partition that every device runs on its shard
(``num_partitions`` in the module's header): the cost analysis counts that partition, so
the counts are multiplied by the partitions, the whole program's work (exact for an even
split; collectives add no arithmetic).

A loop without a known trip count, or one inside a ``conditional`` (which branch runs is
not known statically), leaves the count unknown, and the reason says which loop. A
``custom-call`` (a library routine such as LAPACK's ``gtsv`` behind
``lax.linalg.tridiagonal_solve``) is opaque to the cost analysis: its arithmetic is not
counted, so an executable with one gives a lower bound (``custom_calls``). What a
backend runs outside compiled executables (eager operations, NumPy, Numba) is not in it:
for host code the scenario's declared ``work()["flops"]`` is the count, or there is none.

XLA's cost analysis per computation is reached through jaxlib's HLO module bindings
(``hlo_module_from_text`` and ``hlo_module_cost_analysis``), which are not public API:
where a jaxlib lacks them the count is unknown and says why.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

from .hlo import parse

KEYS = {"flops": "flops", "transcendentals": "transcendentals", "bytes accessed": "bytes_accessed"}
CostOf = Callable[[str], Mapping[str, float]]  # computation name -> its inclusive cost


@dataclasses.dataclass(frozen=True)
class Operations:
    """Per call of one executable (None: not known, ``error`` says why)."""

    flops: float | None
    transcendentals: float | None
    bytes_accessed: float | None
    loops: int  # while loops whose trip counts were applied
    error: str | None = None
    custom_calls: int = 0  # opaque to the cost analysis: the counts are then lower bounds
    partitions: int = 1  # SPMD partitions: the counts are the whole program's (x this)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def unknown(error: str) -> Operations:
    return Operations(None, None, None, 0, error)


@dataclasses.dataclass(frozen=True)
class _Loop:
    name: str
    body: str
    condition: str
    repeats: int  # P(L): its trip count x those of the loops around it
    parent: int | None  # index of the loop it is nested in


def _loops(text: str) -> tuple[str, list[_Loop], list[str]]:
    """The entry, every while loop reachable from it, and why the count is unknown."""
    computations, entry = parse(text)
    loops: list[_Loop] = []
    problems: list[str] = []

    def walk(name: str, repeats: int, parent: int | None, in_branch: bool) -> None:
        for instruction in computations.get(name, []):
            if instruction.opcode == "while":
                trips = instruction.trip_count
                if trips is None:
                    problems.append(f"{instruction.name} has no known trip count")
                if in_branch:
                    problems.append(f"{instruction.name} runs inside a conditional")
                index = len(loops)
                total = repeats * (trips or 1)
                body = instruction.callees["body"][0]
                condition = instruction.callees["condition"][0]
                loops.append(_Loop(instruction.name, body, condition, total, parent))
                walk(body, total, index, in_branch)
                walk(condition, total, index, in_branch)
            elif instruction.opcode == "call":
                walk(instruction.callees["to_apply"][0], repeats, parent, in_branch)
            elif instruction.opcode == "conditional":
                for callees in instruction.callees.values():
                    for branch in callees:
                        walk(branch, repeats, parent, True)

    walk(entry, 1, None, False)
    return entry, loops, problems


def count_operations(text: str, cost_of: CostOf) -> Operations:
    """Flops, transcendentals and bytes accessed per call of the executable whose
    optimized HLO is ``text`` (pure; see the module doc). ``cost_of(name)`` is XLA's cost
    analysis of the module with computation ``name`` as its entry."""
    entry, loops, problems = _loops(text)
    if problems:
        return unknown("; ".join(problems))
    totals = {key: float(cost_of(entry).get(key, 0.0)) for key in KEYS}
    inclusive = []
    for loop in loops:
        body, condition = cost_of(loop.body), cost_of(loop.condition)
        inclusive.append({k: float(body.get(k, 0.0)) + float(condition.get(k, 0.0)) for k in KEYS})
    for index, loop in enumerate(loops):
        children = [i for i, other in enumerate(loops) if other.parent == index]
        for key in KEYS:
            exclusive = inclusive[index][key] - sum(inclusive[i][key] for i in children)
            totals[key] += exclusive * (loop.repeats - 1)
    partitions = _partitions(text)
    return Operations(
        flops=totals["flops"] * partitions,
        transcendentals=totals["transcendentals"] * partitions,
        bytes_accessed=totals["bytes accessed"] * partitions,
        loops=len(loops),
        custom_calls=len(_CUSTOM_CALL.findall(text)),
        partitions=partitions,
    )


_PARTITIONS = re.compile(r"\bnum_partitions=(\d+)")


def _partitions(text: str) -> int:
    """The SPMD partitions the module runs as (``num_partitions`` of its ``HloModule``
    line; 1 when absent): each runs this same partitioned program on its shard."""
    header = text.partition("\n")[0]
    found = _PARTITIONS.search(header) if header.startswith("HloModule ") else None
    return max(int(found.group(1)), 1) if found else 1


_ENTRY = re.compile(r"^ENTRY ", re.MULTILINE)
_CUSTOM_CALL = re.compile(r"^\s+(?:ROOT )?%\S+ = .* custom-call\(", re.MULTILINE)


# attributes of the module header that describe the entry computation's parameters and
# outputs (a donated argument's alias): they do not fit another entry
_ENTRY_ATTRIBUTES = ("input_output_alias=", "buffer_donor=")


def _without_entry_attributes(header: str) -> str:
    """The ``HloModule`` line without `_ENTRY_ATTRIBUTES` (their values nest braces)."""
    for name in _ENTRY_ATTRIBUTES:
        start = header.find(", " + name)
        if start < 0:
            continue
        index, depth = header.index("{", start), 0
        while True:
            depth += {"{": 1, "}": -1}.get(header[index], 0)
            index += 1
            if depth == 0:
                break
        header = header[:start] + header[index:]
    return header


def with_entry(text: str, computation: str) -> str:
    """The module ``text`` with ``computation`` as its entry computation (the old entry's
    aliasing of donated arguments dropped: it names outputs the new entry does not have)."""
    header = re.compile(r"^%" + re.escape(computation) + r" \(", re.MULTILINE)
    if not header.search(text):
        raise ValueError(f"no computation {computation!r} in the HLO text")
    module, newline, rest = text.partition("\n")
    if module.startswith("HloModule "):
        text = _without_entry_attributes(module) + newline + rest
    return header.sub(lambda match: "ENTRY " + match.group(0), _ENTRY.sub("", text), count=1)


def xla_cost_of(compiled: Any) -> CostOf:
    """XLA's cost analysis of ``compiled``'s module with any computation as its entry
    (jaxlib's HLO module bindings; ImportError or AttributeError where they are not)."""
    import jaxlib._hlo as hlo  # not public API: see the module doc
    from jax._src.lib import xla_client

    client = compiled.runtime_executable().client
    analyse = xla_client._xla.hlo_module_cost_analysis
    text = compiled.as_text()
    _, entry = parse(text)
    cache: dict[str, Mapping[str, float]] = {}

    def cost_of(computation: str) -> Mapping[str, float]:
        if computation not in cache:
            module = text if computation == entry else with_entry(text, computation)
            cache[computation] = dict(analyse(client, hlo.hlo_module_from_text(module)))
        return cache[computation]

    return cost_of


def operations_of(compiled: Any) -> Operations:
    """`count_operations` of a compiled executable; unknown, with the reason, where
    XLA's cost analysis cannot be reached or fails."""
    try:
        cost_of = xla_cost_of(compiled)
    except (ImportError, AttributeError) as error:
        return unknown(f"XLA's cost analysis per computation is not reachable: {error}")
    try:
        return count_operations(compiled.as_text(), cost_of)
    except Exception as error:  # a module XLA's parser refuses: no number, the reason
        return unknown(f"{type(error).__name__}: {error}")

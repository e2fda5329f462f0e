"""Static kernel estimate from optimized HLO text (``compiled.as_text()``).

Every non-trivial instruction of a computation is one kernel (a fusion, a copy, a
custom call, ...); parameters, constants, tuples, get-tuple-element and bitcasts are free.
A ``while`` runs its body ``known_trip_count`` times (from its backend_config; a loop
without one is flagged and counted once); ``call`` and ``conditional`` are expanded (a
conditional counts its largest branch and is flagged). ``cost_analysis()`` ignores trip
counts, which is why this reads the text.

Two totals are reported, and they differ on purpose:
- ``kernels``: what this device executes. XLA:CPU may compile a small while loop into one
  native kernel: it wraps the loop in a ``call`` with the frontend attribute
  ``xla_cpu_small_call="true"``; such a call counts as 1 and its loops as ``cpu_native``.
- ``launch_equivalent``: body kernels x trip count for every loop, i.e. what a GPU would
  launch one by one without command buffers.
On XLA:CPU the ``kernels`` total equals the thunk events of a trace (tested).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

TRIVIAL = frozenset(
    {
        "parameter",
        "constant",
        "tuple",
        "get-tuple-element",
        "bitcast",
        "after-all",
        "opt-barrier",
        "add-dependency",
        "domain",
    }
)
CONTAINERS = frozenset({"while", "call", "conditional"})

_HEADER = re.compile(r"^(?P<entry>ENTRY )?%(?P<name>[^\s(]+) \(.*\{\s*$")
_INSTRUCTION = re.compile(
    r"^\s+(?:ROOT )?%(?P<name>[^\s=]+) = (?P<type>.*?) (?P<opcode>[a-z][\w\-]*)\((?P<rest>.*)$"
)
_ATTR = re.compile(
    r"\b(condition|body|calls|to_apply|true_computation|false_computation)=%([^\s,}]+)"
)
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
_TRIP = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')


@dataclasses.dataclass(frozen=True)
class Instruction:
    name: str
    opcode: str
    type: str
    callees: Mapping[str, tuple[str, ...]]
    text: str

    @property
    def trip_count(self) -> int | None:
        match = _TRIP.search(self.text)
        return int(match.group(1)) if match else None

    @property
    def cpu_small_call(self) -> bool:
        return self.opcode == "call" and 'xla_cpu_small_call="true"' in self.text

    @property
    def is_copy(self) -> bool:
        """A non-scalar copy (or copy fusion): data movement, not the loop counter."""
        moves = self.opcode == "copy" or (self.opcode == "fusion" and "copy" in self.name)
        return moves and not self.type.rstrip("{}0123456789,").endswith("[]")

    @property
    def is_transpose(self) -> bool:
        return self.opcode == "transpose" or (self.opcode == "fusion" and "transpose" in self.name)


@dataclasses.dataclass(frozen=True)
class Loop:
    """One while loop: where it is, how often it runs and what one iteration costs."""

    name: str
    computation: str
    trip_count: int | None
    body_kernels: int
    condition_kernels: int
    cpu_native: bool
    copies_in_body: int
    transposes_in_body: int


@dataclasses.dataclass(frozen=True)
class HloEstimate:
    kernels: int
    launch_equivalent: int
    loops: tuple[Loop, ...]
    unknown_trip_count_loops: int
    conditionals: int
    copies_outside_loops: int
    transposes_outside_loops: int
    copies_inside_loops: int
    transposes_inside_loops: int
    # arrays folded into the executable as constants (a closed-over jax.Array, np.ndarray)
    constant_bytes: int = 0
    largest_constant: str = ""  # its HLO type, e.g. ``f32[512,512]``

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# bytes per element of XLA's element types
ELEMENT_BYTES = {
    "pred": 1, "s4": 1, "u4": 1, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1,
    "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
    "s32": 4, "u32": 4, "f32": 4,
    "s64": 8, "u64": 8, "f64": 8, "c64": 8,
    "c128": 16,
}  # fmt: skip
_ARRAY_TYPE = re.compile(r"^(?P<element>[a-z0-9]+)\[(?P<dims>[0-9,]*)\]")


def array_bytes(hlo_type: str) -> int:
    """Bytes of an HLO array type (``f32[512,512]{1,0}``: 1 MiB); 0 for a tuple or an
    element type not listed."""
    match = _ARRAY_TYPE.match(hlo_type)
    if match is None or match.group("element") not in ELEMENT_BYTES:
        return 0
    count = 1
    for dim in filter(None, match.group("dims").split(",")):
        count *= int(dim)
    return count * ELEMENT_BYTES[match.group("element")]


def _constants(computations: Mapping[str, list[Instruction]]) -> tuple[int, str]:
    """(bytes, the largest's type) of every constant of the module."""
    sizes = [
        (array_bytes(i.type), i.type.split("{")[0])
        for instructions in computations.values()
        for i in instructions
        if i.opcode == "constant"
    ]
    if not sizes:
        return 0, ""
    return sum(size for size, _ in sizes), max(sizes)[1]


def parse(text: str) -> tuple[dict[str, list[Instruction]], str]:
    """Computations (name -> instructions) and the name of the entry computation."""
    computations: dict[str, list[Instruction]] = {}
    entry = None
    current: list[Instruction] | None = None
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            current = computations.setdefault(header.group("name"), [])
            if header.group("entry"):
                entry = header.group("name")
            continue
        if line.startswith("}"):
            current = None
            continue
        if current is None:
            continue
        match = _INSTRUCTION.match(line)
        if not match:
            continue
        callees: dict[str, tuple[str, ...]] = {}
        for key, value in _ATTR.findall(line):
            callees[key] = (value,)
        branches = _BRANCHES.search(line)
        if branches:
            callees["branches"] = tuple(
                name.strip().lstrip("%") for name in branches.group(1).split(",")
            )
        current.append(
            Instruction(
                match.group("name"), match.group("opcode"), match.group("type"), callees, line
            )
        )
    if entry is None:
        raise ValueError("no ENTRY computation in the HLO text")
    return computations, entry


@dataclasses.dataclass
class _Totals:
    kernels: int = 0
    launch: int = 0
    copies_out: int = 0
    transposes_out: int = 0
    copies_in: int = 0
    transposes_in: int = 0
    unknown: int = 0
    conditionals: int = 0


def estimate(text: str) -> HloEstimate:
    """Static kernel counts per call of the executable whose optimized HLO is ``text``."""
    computations, entry = parse(text)
    loops: list[Loop] = []

    def walk(
        name: str, totals: _Totals, in_loop: bool, record: bool, native: bool = False
    ) -> tuple[int, int]:
        kernels = launch = 0
        for instruction in computations.get(name, []):
            if instruction.opcode == "while":
                body = instruction.callees["body"][0]
                condition = instruction.callees["condition"][0]
                body_k, body_l = walk(body, totals, True, record, native)
                cond_k, _ = walk(condition, _Totals(), True, False)
                trips = instruction.trip_count
                if trips is None and record:
                    totals.unknown += 1
                count = 1 if trips is None else trips
                kernels += body_k * count
                launch += body_l * count
                if record:
                    body_instructions = computations.get(body, [])
                    loops.append(
                        Loop(
                            instruction.name,
                            name,
                            trips,
                            body_k,
                            cond_k,
                            native,
                            sum(i.is_copy for i in body_instructions),
                            sum(i.is_transpose for i in body_instructions),
                        )
                    )
            elif instruction.opcode == "call":
                small = instruction.cpu_small_call
                callee = instruction.callees["to_apply"][0]
                k, lc = walk(callee, totals, in_loop, record, native or small)
                kernels += 1 if small else k
                launch += lc
            elif instruction.opcode == "conditional":
                branches = instruction.callees.get("branches") or tuple(
                    instruction.callees[key][0]
                    for key in ("true_computation", "false_computation")
                    if key in instruction.callees
                )
                counts = [walk(branch, _Totals(), in_loop, False) for branch in branches]
                if record:
                    totals.conditionals += 1
                kernels += max((k for k, _ in counts), default=0)
                launch += max((lc for _, lc in counts), default=0)
            elif instruction.opcode not in TRIVIAL:
                kernels += 1
                launch += 1
                if record:
                    if in_loop:
                        totals.copies_in += instruction.is_copy
                        totals.transposes_in += instruction.is_transpose
                    else:
                        totals.copies_out += instruction.is_copy
                        totals.transposes_out += instruction.is_transpose
        return kernels, launch

    totals = _Totals()
    kernels, launch = walk(entry, totals, False, True)
    constants, largest = _constants(computations)
    return HloEstimate(
        kernels=kernels,
        launch_equivalent=launch,
        loops=tuple(loops),
        unknown_trip_count_loops=totals.unknown,
        conditionals=totals.conditionals,
        copies_outside_loops=totals.copies_out,
        transposes_outside_loops=totals.transposes_out,
        copies_inside_loops=totals.copies_in,
        transposes_inside_loops=totals.transposes_in,
        constant_bytes=constants,
        largest_constant=largest,
    )


_FUSION_KIND = re.compile(r"\bkind=(k\w+)")
_CUSTOM_TARGET = re.compile(r'custom_call_target="([^"]+)"')


def summarize(text: str) -> dict[str, Any]:
    """What an executable does, in short, for telling two versions apart: the histogram of
    its non-trivial instructions (per computation that runs, not x trip count; fusions by
    kind, e.g. ``fusion:kLoop``), its custom-call targets and its while loops (trip count
    and body kernels), from the optimized HLO text."""
    computations, entry = parse(text)
    reachable, todo = [], [entry]
    while todo:  # the computations that run: entry, loop bodies and conditions, calls
        name = todo.pop()
        if name in reachable or name not in computations:
            continue
        reachable.append(name)
        for instruction in computations[name]:
            if instruction.opcode in CONTAINERS:
                for callees in instruction.callees.values():
                    todo.extend(callees)
    ops: dict[str, int] = {}
    custom_calls: set[str] = set()
    for name in reachable:
        for instruction in computations[name]:
            if instruction.opcode in TRIVIAL or instruction.opcode in CONTAINERS:
                continue
            key = instruction.opcode
            if key == "fusion":
                kind = _FUSION_KIND.search(instruction.text)
                key = f"fusion:{kind.group(1)}" if kind else key
            elif key == "custom-call":
                target = _CUSTOM_TARGET.search(instruction.text)
                custom_calls.add(target.group(1) if target else "?")
            ops[key] = ops.get(key, 0) + 1
    result = estimate(text)
    return {
        "ops": dict(sorted(ops.items())),
        "fusions": sum(count for op, count in ops.items() if op.startswith("fusion")),
        "custom_calls": sorted(custom_calls),
        "loops": [
            {"trip_count": loop.trip_count, "body_kernels": loop.body_kernels}
            for loop in result.loops
        ],
        "kernels": result.kernels,
        "launch_equivalent": result.launch_equivalent,
    }

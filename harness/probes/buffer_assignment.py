"""The named temporaries of a compiled XLA executable, from its buffer assignment.

``compiled.memory_analysis()`` gives totals (arguments, outputs, temporaries); which
instructions the temporary bytes belong to is in ``serialized_buffer_assignment_proto``
(XLA's ``BufferAssignmentProto``), whose logical buffers name their defining instruction
by id only; the names are in the executable's ``HloModuleProto``. jaxlib ships neither
message's Python class, so both are read here from the protobuf wire format, with the field
numbers of ``xla/service/hlo.proto`` (checked against jax 0.10 and 0.12):

- BufferAssignmentProto: 1 logical_buffers, 3 buffer_allocations;
- LogicalBufferProto: 1 id, 2 size, 3 defined_at (Location: 4 instruction_id);
- BufferAllocationProto: 1 index, 2 size, 3 is_thread_local, 5
  is_entry_computation_parameter, 7 maybe_live_out, 9 assigned (1 logical_buffer_id,
  3 size), 12 is_constant;
- HloModuleProto: 3 computations; HloComputationProto: 2 instructions;
  HloInstructionProto: 1 name, 2 opcode, 35 id.

A temporary is what XProf's memory viewer calls one: an allocation that is not an entry
parameter, not a possible output, not a constant and not thread-local. Its logical buffers
overlap in time (XLA reuses offsets), so they are listed largest first, one per defining
instruction, never summed; aliases (parameters of loop bodies, tuples, bitcasts) are left
out. Proto3 omits zero values: a missing id or offset is 0.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

ALIAS_OPCODES = frozenset({"parameter", "tuple", "get-tuple-element", "bitcast"})


@dataclasses.dataclass(frozen=True)
class Temporary:
    """A logical buffer of a temporary allocation, named by its defining instruction."""

    instruction: str
    opcode: str
    bytes: int

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _varint(data: bytes, index: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[index]
        index += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, index


def fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) pairs of one message: ints for varints, bytes otherwise."""
    index = 0
    while index < len(data):
        key, index = _varint(data, index)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, index = _varint(data, index)
            yield number, value
        elif wire == 2:
            length, index = _varint(data, index)
            yield number, data[index : index + length]
            index += length
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            yield number, data[index : index + width]
            index += width
        else:
            raise ValueError(f"unsupported protobuf wire type {wire} (field {number})")


def _first(data: bytes) -> dict[int, Any]:
    """Field number -> its first value (enough for the scalar fields read here)."""
    out: dict[int, Any] = {}
    for number, value in fields(data):
        out.setdefault(number, value)
    return out


def instruction_names(module: bytes) -> dict[int, tuple[str, str]]:
    """Instruction id -> (name, opcode) over every computation of an HloModuleProto."""
    names: dict[int, tuple[str, str]] = {}
    for number, computation in fields(module):
        if number != 3:
            continue
        for inner, instruction in fields(computation):
            if inner != 2:
                continue
            values = _first(instruction)
            names[int(values.get(35, 0))] = (
                bytes(values.get(1, b"")).decode("utf-8", "replace"),
                bytes(values.get(2, b"")).decode("utf-8", "replace"),
            )
    return names


def temporaries(assignment: bytes, module: bytes, top: int = 5) -> list[Temporary]:
    """The ``top`` largest buffers of the temporary allocations, one per instruction."""
    names = instruction_names(module)
    defined_at: dict[int, tuple[int, int]] = {}  # logical buffer id -> (size, instruction id)
    allocations = []
    for number, value in fields(assignment):
        if number == 1:
            buffer = _first(value)
            location = _first(buffer.get(3, b""))
            defined_at[int(buffer.get(1, 0))] = (int(buffer.get(2, 0)), int(location.get(4, 0)))
        elif number == 3:
            allocations.append(value)
    found: dict[str, Temporary] = {}
    for allocation in allocations:
        flags = _first(allocation)
        if any(flags.get(flag) for flag in (3, 5, 7, 12)):
            continue
        for number, assigned in fields(allocation):
            if number != 9:
                continue
            size, instruction = defined_at.get(int(_first(assigned).get(1, 0)), (0, -1))
            name, opcode = names.get(instruction, (f"<instruction {instruction}>", "?"))
            if opcode in ALIAS_OPCODES or size <= 0:
                continue
            if name not in found or found[name].bytes < size:
                found[name] = Temporary(name, opcode, size)
    return sorted(found.values(), key=lambda t: (-t.bytes, t.instruction))[:top]

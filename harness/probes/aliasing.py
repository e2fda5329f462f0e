"""What donation did to a compiled executable, read from its optimized HLO text.

A donated argument that XLA can write an output into appears in the module header's
``input_output_alias`` (``{output index}: (parameter, {}, may-alias)``); one it could not
use appears nowhere (jax warns "Some donated buffers were not usable"). An aliased
parameter that the program still reads after the output was written into it forces XLA's
copy insertion to keep a copy: ``copy`` of the parameter, or a ``copy`` producing the
aliased output from a value computed elsewhere. Those copies are what the donation did
not save, counted here (0 when nothing is donated).

Example:
    >>> text = (
    ...     "HloModule m, input_output_alias={ {}: (0, {}, may-alias) }\\n"
    ...     "ENTRY %main (x: f32[8]) -> f32[8] {\\n"
    ...     "  %x = f32[8]{0} parameter(0)\\n"
    ...     "  ROOT %copy = f32[8]{0} copy(%x)\\n"
    ...     "}\\n"
    ... )
    >>> donation_facts(text).copies
    1
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from .hlo import parse

_ALIAS_BLOCK = re.compile(r"input_output_alias=\{(?P<body>.*?)\}\s*(?:,\s*\w+=|$)")
_ALIAS = re.compile(r"\{(?P<output>[\d,\s]*)\}:\s*\((?P<parameter>\d+),")
_PARAMETER = re.compile(r"parameter\((\d+)\)")
_OPERAND = re.compile(r"%([^\s,)]+)")


@dataclasses.dataclass(frozen=True)
class DonationFacts:
    """Attributes:
    aliased: (output index, parameter number) pairs XLA writes in place.
    copies: ``copy`` instructions of the entry computation that read an aliased
        parameter or produce an aliased output: what donation did not save.
    """

    aliased: tuple[tuple[tuple[int, ...], int], ...]
    copies: int

    @property
    def donated(self) -> int:
        """Parameters whose buffer an output reuses."""
        return len({parameter for _, parameter in self.aliased})

    def to_json(self) -> dict[str, Any]:
        return {
            "donated": self.donated,
            "copies": self.copies,
            "aliased": [[list(output), parameter] for output, parameter in self.aliased],
        }


def aliases(text: str) -> tuple[tuple[tuple[int, ...], int], ...]:
    """The ``input_output_alias`` pairs of the module header (output index, parameter)."""
    header = text.split("\n", 1)[0]
    block = _ALIAS_BLOCK.search(header)
    if block is None:
        return ()
    pairs = []
    for match in _ALIAS.finditer(block.group("body")):
        output = tuple(int(i) for i in match.group("output").replace(" ", "").split(",") if i)
        pairs.append((output, int(match.group("parameter"))))
    return tuple(pairs)


def donation_facts(text: str) -> DonationFacts:
    """The aliased parameters of ``compiled.as_text()`` and the copies left around them."""
    pairs = aliases(text)
    if not pairs:
        return DonationFacts((), 0)
    computations, entry = parse(text)
    instructions = computations[entry]
    numbers = {
        int(match.group(1)): inst.name
        for inst in instructions
        if inst.opcode == "parameter" and (match := _PARAMETER.search(inst.text))
    }
    donated = {numbers[p] for _, p in pairs if p in numbers}
    root = next((inst for inst in instructions if " ROOT " in f" {inst.text.lstrip()}"), None)
    outputs: set[str] = set()
    for output, _ in pairs:
        if root is None:
            continue
        if not output:
            outputs.add(root.name)
        elif root.opcode == "tuple" and len(output) == 1:
            operands = _OPERAND.findall(root.text.split("tuple(", 1)[1])
            if output[0] < len(operands):
                outputs.add(operands[output[0]])
    copies = 0
    for inst in instructions:
        if inst.opcode != "copy":
            continue
        operands = _OPERAND.findall(inst.text.split("copy(", 1)[1])
        if inst.name in outputs or (operands and operands[0] in donated):
            copies += 1
    return DonationFacts(pairs, copies)

"""Why a cell changed between two sides of a comparison: what each side's code does per
call, and what differs.

Times say *that* a cell got slower; the facts say *why*: the per-call counts
(dispatches, kernels, GPU launch equivalents, transfers, host conversions, compilations),
the optimized HLO in short (instructions by kind, fusions, custom calls, while loops and
their bodies, planned argument and temporary bytes) and the environment (versions, XLA
flags, device). `scanbench.probes.passes.cell_facts` measures them where the cell runs
(the gate's served workers, after their timed blocks: never while timing);
`differences` compares two sides. Pure data: the text is `scanbench.gate.render`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

COUNTED = (  # the per-call counts compared, in the order an explanation names them
    "h2d",
    "d2h",
    "host_conversions",
    "compiles",
    "traces",
    "dispatches",
    "launch_equivalent",
    "kernels",
)
PLANNED = ("argument_bytes", "temp_bytes")  # from XLA's memory plan of each executable


@dataclasses.dataclass(frozen=True)
class Facts:
    """What one side's cell does per call (JSON-ready)."""

    counts: Mapping[str, float | None]
    executables: Mapping[str, Mapping[str, Any]]  # name -> `summarize` + calls + plan
    environment: Mapping[str, str | None]

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Facts:
        return cls(dict(data["counts"]), dict(data["executables"]), dict(data["environment"]))


@dataclasses.dataclass(frozen=True)
class Difference:
    """One thing that differs: ``aspect`` is ``counts``, ``hlo`` or ``environment``;
    ``name`` says which (a count key; ``EXECUTABLE/fusions``, ``EXECUTABLE/loop 1 body
    kernels``, ``EXECUTABLE/op fusion:kLoop``; ``XLA_FLAGS``)."""

    aspect: str
    name: str
    before: Any
    after: Any


def _hlo(name: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Difference]:
    found = []
    for key in ("fusions", "custom_calls", *PLANNED):
        if before.get(key) != after.get(key):
            found.append(Difference("hlo", f"{name}/{key}", before.get(key), after.get(key)))
    loops_before, loops_after = before.get("loops") or [], after.get("loops") or []
    if len(loops_before) != len(loops_after):
        found.append(Difference("hlo", f"{name}/while loops", len(loops_before), len(loops_after)))
    for index, (a, b) in enumerate(zip(loops_before, loops_after, strict=False), start=1):
        for key in ("body_kernels", "trip_count"):
            if a.get(key) != b.get(key):
                what = "body kernels" if key == "body_kernels" else "trip count"
                found.append(Difference("hlo", f"{name}/loop {index} {what}", a[key], b[key]))
    ops_before, ops_after = before.get("ops") or {}, after.get("ops") or {}
    for op in sorted(set(ops_before) | set(ops_after)):
        if ops_before.get(op, 0) != ops_after.get(op, 0):
            found.append(
                Difference("hlo", f"{name}/op {op}", ops_before.get(op, 0), ops_after.get(op, 0))
            )
    return found


def differences(baseline: Facts, candidate: Facts) -> tuple[Difference, ...]:
    """Everything that differs, counts first (in `COUNTED` order), then the HLO of each
    executable, then the environment."""
    found = [
        Difference("counts", key, baseline.counts.get(key), candidate.counts.get(key))
        for key in COUNTED
        if baseline.counts.get(key) != candidate.counts.get(key)
    ]
    names = list(dict.fromkeys([*baseline.executables, *candidate.executables]))
    for name in names:
        before, after = baseline.executables.get(name), candidate.executables.get(name)
        if before is None or after is None:
            present = (before is not None, after is not None)
            found.append(Difference("hlo", f"{name}/executable", *present))
            continue
        found.extend(_hlo(name, before, after))
    for key in sorted(set(baseline.environment) | set(candidate.environment)):
        if baseline.environment.get(key) != candidate.environment.get(key):
            pair = (baseline.environment.get(key), candidate.environment.get(key))
            found.append(Difference("environment", key, *pair))
    return tuple(found)

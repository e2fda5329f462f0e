"""What a cell's counting passes found: the `Counts` type and the one table of count keys.

A record's counts are stored as JSON sections, one per probe (``trace``, ``spans``,
``transfers``, ``compilations``, ``static``, ``memory``, ``gpu``, ...), each the probe's
own ``to_json``, plus ``<probe>_error`` where a probe failed. `Counts` is that object as
a frozen type: the sections by name, the errors by probe, and the per-call view every
reader uses (the gate, the reports, the decomposition, pytest-benchmark, the environment
A/B). Which per-call counts exist, where each is read from, whether the gate holds it
exactly and which breakdown names what grew: `COUNT_KEYS`, in the manner of pyperf's
metadata table. Nothing here runs a probe (that is `scanbench.probes.passes`), so the reports
and the gate read counts without importing the probe runner.

Example:
    >>> counts = Counts.from_json({"trace": {"dispatches": 4}, "calls": 2})
    >>> counts.per_call()["dispatches"]
    2.0
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from .errors import StoreError

# the probe sections a Counts may hold, in the order they are stored
SECTIONS = (
    "trace",
    "spans",
    "transfers",
    "compilations",
    "static",
    "memory",
    "gpu",
    "gpu_command_buffers",
    "linear",
    "conversions",
    "python",
    "host_calls",
)
# probes whose failure is stored as ``<probe>_error`` (the others report inside a section)
PROBES = (
    "trace",
    "transfers",
    "compilations",
    "static",
    "memory",
    "linear",
    "python",
    "host_calls",
)


@dataclasses.dataclass(frozen=True)
class CountKey:
    """One per-call count: its name, its label in reports, where it is read from, and how
    the gate treats it.

    Attributes:
        name: the key of `Counts.per_call` (and of the gate's counts file).
        label: the column header in reports.
        section, field: read as ``counts.<section>[<field>]``, divided by the calls the
            counted region covered (`Counts.calls_per_region`).
        gated: the gate compares it with the stored expectation, exactly (counts are
            deterministic); any increase fails.
        breakdown: the per-call breakdown that names what grew (dispatches by function,
            kernels by HLO op, launches by executable), if any.
        measure: ``count`` (an integer per call at every size) or ``bytes``.
    """

    name: str
    label: str
    section: str
    field: str
    gated: bool = False
    breakdown: str | None = None
    measure: str = "count"
    fallback: tuple[str, str] | None = None  # (section, field) of results stored before


COUNT_KEYS: tuple[CountKey, ...] = (
    CountKey("dispatches", "dispatches", "trace", "dispatches", True, "dispatches_by_function"),
    CountKey("executions", "executions", "trace", "executions"),
    CountKey("kernels", "kernels (trace)", "trace", "kernels", True, "kernels_by_op"),
    CountKey("kernels_static", "kernels (static)", "static", "kernels"),
    CountKey(
        "launch_equivalent",
        "GPU launch equiv.",
        "static",
        "launch_equivalent",
        True,
        "launch_by_executable",
    ),
    CountKey("donated", "donated arguments", "static", "donated"),
    CountKey("donation_copies", "copies despite donation", "static", "donation_copies"),
    CountKey("h2d", "H2D", "transfers", "h2d", True),
    CountKey("h2d_bytes", "H2D bytes", "transfers", "h2d_bytes", measure="bytes"),
    CountKey("h2d_unknown", "H2D of unknown size", "transfers", "h2d_unknown_size"),
    CountKey("d2h", "D2H", "transfers", "d2h"),
    CountKey("d2h_bytes", "D2H bytes", "transfers", "d2h_bytes", measure="bytes"),
    CountKey(
        "host_conversions",
        "host conversions",
        "conversions",
        "total",
        True,
        "conversions_by_function",
        fallback=("spans", "host_conversions"),  # the profiler's events: not np.array(x)
    ),
    CountKey("waits", "waits", "conversions", "waits", True, "waits_by_function"),
    CountKey("compiles", "compilations", "compilations", "compiles"),
    CountKey("traces", "traces", "compilations", "traces"),
)
KEYS: Mapping[str, CountKey] = {key.name: key for key in COUNT_KEYS}
GATED: tuple[str, ...] = tuple(key.name for key in COUNT_KEYS if key.gated)
BREAKDOWNS: tuple[str, ...] = tuple(key.breakdown for key in COUNT_KEYS if key.breakdown)


@dataclasses.dataclass(frozen=True)
class Counts:
    """The counts of one cell (see the module doc); empty when no probe ran.

    Attributes:
        sections: probe name -> that probe's stored JSON (`SECTIONS`).
        errors: probe name -> why it produced no number (`PROBES`).
        calls: calls the counted region covered (1 since counts are taken on one call).
        scale: results stored before `scanbench.probes.extrapolation` were counted at a smaller
            size and scaled by this (1.0 otherwise).
    """

    sections: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    errors: Mapping[str, str] = dataclasses.field(default_factory=dict)
    calls: int = 1
    scale: float = 1.0

    def __bool__(self) -> bool:
        return bool(self.sections or self.errors)

    def section(self, name: str) -> Mapping[str, Any]:
        """A probe's stored section, or an empty mapping when it did not run."""
        if name not in SECTIONS:
            raise ValueError(f"unknown counts section {name!r}; one of: {', '.join(SECTIONS)}")
        return self.sections.get(name) or {}

    @property
    def trace(self) -> Mapping[str, Any]:
        """`scanbench.probes.trace`: dispatches, executions, kernels and their breakdowns."""
        return self.section("trace")

    @property
    def spans(self) -> Mapping[str, Any]:
        """`scanbench.probes.spans`: busy times of the traced call, host conversions."""
        return self.section("spans")

    @property
    def transfers(self) -> Mapping[str, Any]:
        """`scanbench.probes.transfers`: host<->device transfers under the transfer guard."""
        return self.section("transfers")

    @property
    def compilations(self) -> Mapping[str, Any]:
        """`scanbench.probes.compilations`: traces and compiles inside the counted call."""
        return self.section("compilations")

    @property
    def static(self) -> Mapping[str, Any]:
        """The static HLO estimate of the backend's executables (`scanbench.probes.passes`)."""
        return self.section("static")

    @property
    def memory(self) -> Mapping[str, Any]:
        """`scanbench.probes.memory`: measured peak, minimum, XLA's plan."""
        return self.section("memory")

    @property
    def conversions(self) -> Mapping[str, Any]:
        """`scanbench.probes.conversions`: device arrays converted to host values."""
        return self.section("conversions")

    @property
    def linear(self) -> Mapping[str, Any]:
        """`scanbench.probes.extrapolation`: the fixed + per-unit model of every total."""
        return self.section("linear")

    @property
    def calls_per_region(self) -> float:
        """How many calls at the record's size one stored count stands for."""
        return (self.calls or 1) / (self.scale or 1.0)

    def per_call(self) -> dict[str, float | None]:
        """Every `COUNT_KEYS` count per call at the record's size; None where the probe
        did not produce the number (or the count was not linear along the scenario's
        ``count_along``)."""
        static = self.static
        out: dict[str, float | None] = {}
        for key in COUNT_KEYS:
            section = self.section(key.section)
            if key.section == "static" and not static.get("available"):
                section = {}
            value = section.get(key.field)
            if value is None and key.fallback is not None and key.section not in self.sections:
                value = self.section(key.fallback[0]).get(key.fallback[1])
            out[key.name] = None if value is None else value / self.calls_per_region
        return out

    def breakdowns(self) -> dict[str, dict[str, float]]:
        """What the gated totals are made of, per call: dispatches by outermost jitted
        function, kernels by HLO op (trace), GPU launch equivalent by executable (static),
        host conversions by the function that made them."""
        trace, static = self.trace, self.static
        calls = self.calls_per_region
        launches = {  # an entry without its figure (an older or hand-made file) is left out
            name: info["launch_equivalent"] * info.get("calls_per_run", 1)
            for name, info in (static.get("executables") or {}).items()
            if info.get("launch_equivalent") is not None
        }
        return {
            "dispatches_by_function": {
                name: value / calls
                for name, value in (trace.get("dispatches_by_function") or {}).items()
            },
            "kernels_by_op": {
                name: value / calls for name, value in (trace.get("kernels_by_op") or {}).items()
            },
            "launch_by_executable": {name: value / calls for name, value in launches.items()},
            "conversions_by_function": {
                name: value / calls
                for name, value in (self.conversions.get("by_function") or {}).items()
            },
            "waits_by_function": {
                name: value / calls
                for name, value in (self.conversions.get("waits_by_function") or {}).items()
            },
        }

    def error_text(self) -> str:
        """``probe: message; ...`` of every failed probe ("" when none failed)."""
        return "; ".join(f"{probe}: {message}" for probe, message in self.errors.items())

    def with_section(self, name: str, value: Mapping[str, Any]) -> Counts:
        if name not in SECTIONS:
            raise ValueError(f"unknown counts section {name!r}; one of: {', '.join(SECTIONS)}")
        return dataclasses.replace(self, sections={**self.sections, name: dict(value)})

    def to_json(self) -> dict[str, Any]:
        """The stored layout: ``calls``, ``scale``, the sections, ``<probe>_error``."""
        if not self:
            return {}
        out: dict[str, Any] = {"calls": self.calls, "scale": self.scale}
        out.update({name: dict(self.sections[name]) for name in SECTIONS if name in self.sections})
        out.update({f"{probe}_error": message for probe, message in self.errors.items()})
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Counts:
        """Parse the stored layout; an unknown key is a `StoreError` naming it."""
        data = dict(data or {})
        calls = data.pop("calls", 1)
        scale = data.pop("scale", 1.0)
        sections, errors = {}, {}
        for key, value in data.items():
            if key in SECTIONS:
                if not isinstance(value, Mapping):
                    raise StoreError(f"counts.{key} must be an object, got {value!r:.60}")
                sections[key] = value
            elif key.endswith("_error") and key[: -len("_error")] in PROBES:
                errors[key[: -len("_error")]] = str(value)
            else:
                allowed = [*SECTIONS, *(f"{p}_error" for p in PROBES), "calls", "scale"]
                raise StoreError(f"counts has an unknown key {key!r}; allowed: {allowed}")
        return cls(sections, errors, calls, scale)

"""The points of a sweep: ``--grow AXIS=START..STOP[:POINTS|:xFACTOR]`` parsed, its values
(geometric steps), and the sizes they name in each selected scenario.

A point at value v of axis A grown from base size B is the size ``B@A=v``
(`scanbench.api.grown_size_name`), except at the base size's own value, which is the
base size itself: the user's own size is measured as it always is, and its table in the
report carries the sentence the sweep has to say about it.

Example:
    >>> spec = parse_grow("population=2..64:x2")
    >>> spec.values()
    (2, 4, 8, 16, 32, 64)
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..api import InputError, Scenario, grown_parts, grown_size_name

DEFAULT_FACTOR = 2.0
MAX_POINTS = 64
FORMAT = "AXIS=START..STOP[:POINTS|:xFACTOR], e.g. population=2..256 or n=10..10000:5"
_SPEC = re.compile(
    r"^(?P<axis>[A-Za-z_]\w*)=(?P<start>\d+)\.\.(?P<stop>\d+)"
    r"(?::(?P<points>\d+)|:?x(?P<factor>[0-9.]+))?$"
)


@dataclasses.dataclass(frozen=True)
class GrowSpec:
    """One ``--grow`` option: an axis, a range, and its steps (a count or a factor)."""

    axis: str
    start: int
    stop: int
    points: int | None = None  # this many points, geometrically spaced
    factor: float | None = None  # or each point this many times the one before

    def values(self) -> tuple[int, ...]:
        """The integer points from ``start`` to ``stop`` (both included), geometric."""
        if self.points is not None:
            ratio = (self.stop / self.start) ** (1 / (self.points - 1))
            raw = [self.start * ratio**index for index in range(self.points)]
        else:
            factor = self.factor or DEFAULT_FACTOR
            count = math.floor(math.log(self.stop / self.start) / math.log(factor) + 1e-9)
            raw = [self.start * factor**index for index in range(count + 1)]
            if len(raw) > 1 and self.stop / raw[-1] < math.sqrt(factor):
                raw.pop()  # STOP replaces a point closer to it than half a step
            raw.append(self.stop)
        return tuple(sorted({min(self.stop, max(self.start, round(v))) for v in raw}))

    def text(self) -> str:
        steps = f":{self.points}" if self.points else f":x{self.factor or DEFAULT_FACTOR:g}"
        return f"{self.axis}={self.start}..{self.stop}{steps}"


def parse_grow(text: str) -> GrowSpec:
    """A ``--grow`` value, checked (`InputError` naming the option and the format)."""
    match = _SPEC.match(text.strip())
    if match is None:
        raise InputError(f"--grow {text!r}: expected {FORMAT}")
    start, stop = int(match["start"]), int(match["stop"])
    points = int(match["points"]) if match["points"] else None
    try:
        factor = float(match["factor"]) if match["factor"] else None
    except ValueError:
        raise InputError(f"--grow {text!r}: the factor after x must be a number > 1") from None
    if start < 1 or stop <= start:
        raise InputError(f"--grow {text!r}: START must be >= 1 and below STOP; {FORMAT}")
    if points is not None and not 2 <= points <= MAX_POINTS:
        raise InputError(f"--grow {text!r}: POINTS must be 2 .. {MAX_POINTS}")
    if factor is not None and not (math.isfinite(factor) and factor > 1):
        raise InputError(f"--grow {text!r}: the factor after x must be a number > 1")
    spec = GrowSpec(match["axis"], start, stop, points, factor)
    if len(spec.values()) > MAX_POINTS:
        raise InputError(f"--grow {text!r}: more than {MAX_POINTS} points; use a larger factor")
    return spec


@dataclasses.dataclass(frozen=True)
class Sweep:
    """One axis of one scenario, swept from a base size (stored with the run).

    Attributes:
        values: the points planned (the base size's own value added when in range).
    """

    scenario: str
    source: str
    axis: str
    param: str
    unit: str
    base: str
    base_value: int
    values: tuple[int, ...]
    dtype: str
    minimum: int = 1
    spec: str = ""

    def size_name(self, value: int) -> str:
        """The size measured at ``value``: the base size at its own value."""
        return (
            self.base if value == self.base_value else grown_size_name(self.base, self.axis, value)
        )

    def value_of(self, size: str, size_params: Mapping[str, Any]) -> int | None:
        """The point a record of this scenario measured, or None when it is not on this
        axis from this base."""
        if size == self.base:
            return self.base_value
        grown = grown_parts(size)
        if grown is None or grown[:2] != (self.base, self.axis):
            return None
        value = size_params.get(self.param, grown[2])
        return value if isinstance(value, int) else None

    @property
    def step(self) -> float:
        """The typical ratio between neighbouring points (what "one step beyond" means)."""
        ratios = [b / a for a, b in zip(self.values, self.values[1:], strict=False)]
        return sorted(ratios)[len(ratios) // 2] if ratios else DEFAULT_FACTOR

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "values": list(self.values)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Sweep:
        return cls(**{**data, "values": tuple(data["values"])})


def sweep_of(spec: GrowSpec, scenario: Scenario, source: str, base: str, dtype: str) -> Sweep:
    """The sweep ``spec`` names in ``scenario`` from size ``base`` (every name checked)."""
    axis = scenario.axis(spec.axis)
    base_size = scenario.size(base)
    if spec.start < axis.minimum:
        raise InputError(
            f"--grow {spec.text()}: {spec.axis} takes values >= {axis.minimum} in scenario "
            f"{scenario.name!r}"
        )
    base_value = base_size[axis.param]
    values = set(spec.values())
    if spec.start <= base_value <= spec.stop:
        values.add(base_value)  # the user's own size is one of the points
    return Sweep(
        scenario.name,
        source,
        spec.axis,
        axis.param,
        axis.unit,
        base,
        base_value,
        tuple(sorted(values)),
        dtype,
        axis.minimum,
        spec.text(),
    )


def check_specs(specs: Sequence[GrowSpec]) -> None:
    """Each axis swept once."""
    axes = [spec.axis for spec in specs]
    for axis in dict.fromkeys(axes):
        if axes.count(axis) > 1:
            raise InputError(f"--grow: axis {axis!r} is given twice; give each axis once")

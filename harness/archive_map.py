"""A quality-diversity archive as a record stores it: the best objective per grid cell.

A scenario whose output is an archive over a grid of two measures (CMA-ME, MAP-Elites)
returns ``ArchiveMap(...).to_output()`` among the items of its ``describe_output``; the
worker stores them with the record (``extra["output"]``), and the HTML report draws one
heatmap per backend from them (`ArchiveMap.from_output`), so a reader sees whether the
backends found the same diversity. A report never re-runs a benchmark: this is all it has.

Example:
    >>> grid = ArchiveMap(((1.0, None), (None, -2.5)), ("effort", "angle"), ((0, 1), (0, 1)))
    >>> ArchiveMap.from_output(grid.to_output()) == grid
    True
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, ClassVar

from .errors import StoreError


@dataclasses.dataclass(frozen=True)
class ArchiveMap:
    """The best objective of every cell of a 2-D archive (None where the cell is empty).

    Attributes:
        objective: one row per cell along the first measure, one value per cell along the
            second (pyribs' ``GridArchive`` flat index ``i * cells[1] + j`` is row ``i``,
            column ``j``).
        measures: the two measures' names.
        ranges: each measure's (lower, upper) bound: the grid spans them.
    """

    objective: tuple[tuple[float | None, ...], ...]
    measures: tuple[str, str]
    ranges: tuple[tuple[float, float], tuple[float, float]]

    KEY: ClassVar[str] = "archive_map"  # its key among a record's output items

    def __post_init__(self) -> None:
        rows = tuple(tuple(_cell(value) for value in row) for row in self.objective)
        if not rows or not rows[0] or len({len(row) for row in rows}) != 1:
            raise ValueError(
                f"ArchiveMap objective: a non-empty rectangular grid of rows, got row lengths "
                f"{[len(row) for row in rows]}"
            )
        measures = tuple(str(name) for name in self.measures)
        ranges = tuple((float(low), float(high)) for low, high in self.ranges)
        if len(measures) != 2 or len(ranges) != 2 or any(lo >= hi for lo, hi in ranges):
            raise ValueError(
                f"ArchiveMap: two measure names and two (lower, upper) ranges with lower < "
                f"upper, got measures={self.measures!r}, ranges={self.ranges!r}"
            )
        object.__setattr__(self, "objective", rows)
        object.__setattr__(self, "measures", measures)
        object.__setattr__(self, "ranges", ranges)

    @property
    def cells(self) -> tuple[int, int]:
        return len(self.objective), len(self.objective[0])

    @property
    def occupied(self) -> int:
        return sum(value is not None for row in self.objective for value in row)

    def to_output(self) -> dict[str, Any]:
        """``{KEY: JSON}``: to merge into what ``describe_output`` returns."""
        return {
            self.KEY: {
                "objective": [list(row) for row in self.objective],
                "measures": list(self.measures),
                "ranges": [list(bounds) for bounds in self.ranges],
            }
        }

    @classmethod
    def from_output(cls, output: Mapping[str, Any] | None) -> ArchiveMap | None:
        """The map among a record's output items, None when it stores none.

        Raises:
            StoreError: the item is there but is not an archive map.
        """
        if not output or cls.KEY not in output:
            return None
        stored = output[cls.KEY]
        try:
            return cls(stored["objective"], stored["measures"], stored["ranges"])
        except (KeyError, TypeError, ValueError) as error:
            raise StoreError(
                f"a record's output item {cls.KEY!r} is not an archive map ({error}); it "
                "needs 'objective' (rows of numbers or null), 'measures' (two names) and "
                "'ranges' (two [lower, upper])"
            ) from None


def _cell(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"ArchiveMap objective: finite numbers or None, got {value!r}")
    return number

"""Which memory bound applies to a cell: the copy bandwidth of the level its working set
fits in, measured in the run (`scanbench.probes.caches`). Pure: reports read it from the
stored levels."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def bound_for(
    levels: Sequence[Mapping[str, Any]], working_set_bytes: float, parallel: bool
) -> tuple[str, float] | None:
    """(level name, bytes per second) of the smallest level that holds the working set
    (in half of it, as the copy that measured the level held its source and
    destination), else the last (DRAM); every core's figure for a parallel backend.
    None without measured levels.

    Example:
        >>> levels = [{"name": "L2", "size_bytes": 2**20, "bytes_per_s": 2e11,
        ...            "bytes_per_s_all": 2.5e11},
        ...           {"name": "DRAM", "size_bytes": None, "bytes_per_s": 4e10,
        ...            "bytes_per_s_all": 4.4e10}]
        >>> bound_for(levels, 100_000, parallel=False)
        ('L2', 200000000000.0)
    """
    if not levels:
        return None
    key = "bytes_per_s_all" if parallel else "bytes_per_s"
    for level in levels:  # smallest first
        size = level.get("size_bytes")
        if size is not None and working_set_bytes <= size / 2:
            return str(level["name"]), float(level[key])
    last = levels[-1]
    return str(last["name"]), float(last[key])

"""The measured peak memory of one call: what both memory probes return (`scanbench.probes.
memory.rss_peak` on CPU, `scanbench.probes.gpu.device_peak` on GPU)."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class MeasuredPeak:
    """Peak memory growth of one call over the state before it (None: not measured)."""

    bytes: int | None
    method: str  # "rss": process high-water mark (CPU); "device": memory_stats (GPU)
    exact: bool = True  # False: an upper bound
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

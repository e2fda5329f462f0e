"""Memory-bandwidth probe: the best of several large NumPy copies.

A copy of ``nbytes`` reads ``nbytes`` and writes ``nbytes``; the probe reports
``2 * nbytes / best_time`` (the STREAM "copy" convention, which does not count the extra
read a write-allocate cache may add). It is the bound against which memory-bound
workloads (the TDMA sweeps) are compared: ``time / (min_bytes / bandwidth)``.
"""

from __future__ import annotations

import time

import numpy as np

from ..api import InputError


def copy_bandwidth(nbytes: int = 256 * 2**20, repeats: int = 7) -> dict[str, float]:
    """Measure host memory bandwidth in bytes/s with ``np.copyto`` of ``nbytes``."""
    if nbytes < 2**20 or repeats < 1:
        raise InputError(f"need nbytes >= 1 MiB and repeats >= 1, got {nbytes}, {repeats}")
    src = np.ones(nbytes // 8, dtype=np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # touch both buffers so page faults are not timed
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    moved = 2 * src.nbytes
    return {"bytes_per_s": moved / best, "copy_bytes": float(src.nbytes), "best_s": best}

"""A measuring worker compiles its Numba functions cold, as it does its JAX programs: the
*compile* figure is never a load from Numba's on-disk cache (`scanbench.compile_cache`)."""

from __future__ import annotations

import os

from scanbench.cells import Cell
from scanbench.execution.launcher import run_cell_in_worker
from scanbench.sampling import TimingConfig
from tests.support.paths import SCENARIO_FILES

SCENARIO = str(SCENARIO_FILES / "numba_cached.py")
QUICK = TimingConfig(warmup=0, min_time_s=0.0, min_count=2, max_count=2)
HIT = "came from Numba's cache"  # the backend's prepare fails so on a cache hit


def test_a_cell_worker_compiles_numba_cold_though_the_users_cache_is_warm(tmp_path):
    cache = tmp_path / "numba-cache"
    environ = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    cell = Cell("numba_cached", "numba", "smoke", "float64", 0, SCENARIO)

    def run(counts_only: bool):
        return run_cell_in_worker(
            cell, QUICK, 300, probes=counts_only, environ=environ, counts_only=counts_only
        )

    first = run(counts_only=True)  # a counts-only cell reports no compile: the user's cache
    assert first.status == "ok", first.error
    assert any(cache.rglob("*.nbi")), "the user's cache was not written"
    measured = run(counts_only=False)
    assert measured.status == "ok", measured.error  # compiled, not loaded
    assert measured.prepare_s is not None and measured.samples_s
    again = run(counts_only=True)  # the cache was warm all along: this one loads from it
    assert again.status == "failed" and HIT in again.error, again.error

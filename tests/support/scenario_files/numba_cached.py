"""A Numba backend whose kernel is ``cache=True``: its prepare fails when the kernel came
from Numba's on-disk cache instead of a compile, so a cell that reports a cache load as
its compile time fails loudly (`tests/execution/test_numba_cold.py`).

Written against the public API only, as a user's own scenario file would be.
"""

from __future__ import annotations

import numba
import numpy as np

from scanbench import MismatchError, Scenario, Size, Strategy, host_backend


@numba.njit(cache=True)
def doubled(x):
    out = np.empty_like(x)
    for i in range(x.size):
        out[i] = 2.0 * x[i]
    return out


def _compiled(inputs):
    doubled(inputs[:2])  # compiles, or loads from the cache
    hits = sum(doubled.stats.cache_hits.values())
    if hits:
        raise RuntimeError(f"doubled came from Numba's cache ({hits} hit)")
    return inputs


def _check(output, expected, dtype):
    error = float(np.max(np.abs(np.asarray(output) - expected)))
    if error > 1e-12:
        raise MismatchError("doubled output differs", error, 1e-12)
    return error


SCENARIO = Scenario(
    name="numba_cached",
    description="doubling a vector with a cache=True Numba kernel",
    sizes={"smoke": Size("smoke", {"n": 8}), "default": Size("default", {"n": 1000})},
    make_inputs=lambda size, seed, dtype: np.arange(size["n"], dtype=dtype),
    reference=lambda inputs: 2.0 * inputs,
    check=_check,
    work=lambda size, dtype: {"elements": float(size["n"])},
    backends={
        "numba": host_backend("numba", Strategy.NUMBA, "numba", doubled, layout=_compiled),
    },
    throughput_unit="elements",
)

"""The gate's workers compile through the persistent compilation cache: the gate times
calls, never compiles, so a rule's later workers load what its first one compiled."""

from __future__ import annotations

import numpy as np

from scanbench.compile_cache import CACHE_ENV
from scanbench.gate.interleave import ServedCell, Side
from scanbench.gate.rules import BaselineRule
from tests.support.paths import REPO_ROOT, SCENARIO_FILES

TOY = str(SCENARIO_FILES / "toy.py")
RULE = BaselineRule(TOY, "jax-async", "smoke", delta=0.1, floor_s=0.0)


def served_entries(folder) -> list[str]:
    """Serve the toy's jitted cell once with ``folder`` as the cache; its files after."""
    side = Side(REPO_ROOT, environ={CACHE_ENV: str(folder)})
    with ServedCell(RULE, side, 120) as served:
        assert np.median(served.samples(3)) > 0
    return sorted(path.name for path in folder.iterdir()) if folder.exists() else []


def test_a_served_cell_compiles_through_the_cache_and_the_next_one_reuses_it(tmp_path):
    folder = tmp_path / "jax-cache"
    first = served_entries(folder)
    assert first, "the worker's compiles were not written to the cache"
    assert served_entries(folder) == first  # the second worker found every entry


def test_with_the_cache_off_a_served_cell_writes_nothing(tmp_path):
    side = Side(REPO_ROOT, environ={CACHE_ENV: "off", "XDG_CACHE_HOME": str(tmp_path)})
    with ServedCell(RULE, side, 120) as served:
        assert np.median(served.samples(3)) > 0
    assert not any(tmp_path.iterdir())

"""Where a spell planted by `tests/support/scenario_files/spells.py` must be found."""

from __future__ import annotations

import numpy as np

from scanbench.spells import MIN_FACTOR, SlowSpell


def found_where_planted(spell: SlowSpell, samples, first: int, last: int) -> bool:
    """The spell covers the planted window (each end within one sample), and every sample
    it takes in beyond that was itself slow: a busy machine (a parallel test run) can slow
    the calls next to the window too."""
    samples = np.asarray(samples)
    if spell.first > first + 1 or spell.last < last - 1:
        return False
    inside = np.zeros(len(samples), bool)
    inside[spell.first : spell.last + 1] = True
    rest = float(np.median(samples[~inside]))
    beyond = [i for i in np.flatnonzero(inside) if not first - 1 <= i <= last + 1]
    return all(samples[i] >= MIN_FACTOR * rest for i in beyond)

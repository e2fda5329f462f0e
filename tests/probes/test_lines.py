"""The Python lines one call of host code runs (`scanbench.probes.lines`)."""

from __future__ import annotations

import numpy as np

from scanbench.probes.lines import count_lines, is_own
from scanbench.timing import call_and_wait


def _loop(columns: np.ndarray) -> np.ndarray:
    out = np.empty_like(columns)
    for i in range(columns.shape[1]):
        out[:, i] = np.sin(columns[:, i])  # the loop's body: one line, two library calls
    return out


def test_the_hottest_line_is_the_loop_body_and_libraries_are_not_traced():
    columns = np.ones((4, 37))
    counted = count_lines(lambda: call_and_wait(_loop, columns, block=lambda out: out))
    where, count, code = counted.hottest[0]
    assert where.startswith("test_lines.py:") and code.startswith("out[:, i] = np.sin(")
    assert count == 37
    # the for line runs once more than its body, the function's other lines and this
    # test's two lambdas once each; numpy's and scanbench's own Python code
    # (call_and_wait) are not counted
    assert counted.lines == 37 + 38 + 2 + 2


def test_own_code_is_the_backends_and_the_bundled_scenarios():
    import importlib

    import numpy

    import scanbench.timing as timing

    reference = importlib.import_module("scanbench.scenarios.tridiagonal.reference")

    assert is_own(__file__, __name__)
    assert is_own(reference.__file__, reference.__name__)
    assert not is_own(timing.__file__, timing.__name__)
    assert not is_own(numpy.__file__, "numpy")

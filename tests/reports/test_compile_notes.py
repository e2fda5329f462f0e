"""The compile split under each table (`scanbench.reports.tables.compile_notes`)."""

from __future__ import annotations

import pandas as pd

from scanbench.reports.tables import compile_notes


def test_each_jax_row_gets_its_compile_by_stage_and_other_rows_none():
    ok = pd.DataFrame(
        {
            "backend": ["scan", "numba", "older"],
            "engine": ["jax", "numba", "jax"],
            "compile_trace_s": [0.0078, 0.0, None],
            "compile_lower_s": [0.0376, 0.0, None],
            "compile_xla_s": [0.262, 0.0, None],
            "compile_rest_s": [0.0142, 1.2, None],
        }
    )
    (note,) = compile_notes(ok)
    assert note.startswith("compile by stage: trace / lower / XLA compile / the rest")
    assert note.endswith("for scan 7.8 ms / 37.6 ms / 262 ms / 14.2 ms")
    assert compile_notes(ok[ok["backend"] == "older"]) == []  # recorded before: no note

"""A scenario whose backends fail with text that is not clean: a lone surrogate (a file
name that is not UTF-8, as `os.fsdecode` gives it), markdown's ``|`` and line breaks, and
a terminal's escape sequences."""

from __future__ import annotations

import os

import numpy as np

from scanbench import Backend, Scenario, Size, Strategy

HOSTILE = {
    "surrogate": "cannot open " + os.fsdecode(b"caf\xe9.npy"),
    "markdown": "a | b\n# not a heading\n| not | a table |",
    "terminal": "\x1b]0;retitled\x07\x1b[2Jcleared\rover\x9b",
}


def _raise(text):
    def run(x):
        raise RuntimeError(text)

    return run


SCENARIO = Scenario(
    name="hostile-text",
    description="backends that fail with hostile text",
    sizes={"smoke": Size("smoke", {"n": 8}), "default": Size("default", {"n": 16})},
    make_inputs=lambda size, seed, dtype: np.ones(size["n"], dtype),
    reference=lambda x: 2.0 * x,
    check=lambda output, expected, dtype: 0.0,
    work=lambda size, dtype: {"elements": float(size["n"])},
    throughput_unit="elements",
    backends={
        name: Backend(
            name=name,
            strategy=Strategy.SEQUENTIAL,
            engine="numpy",
            prepare=lambda inputs, size: inputs,
            run=_raise(text),
        )
        for name, text in HOSTILE.items()
    },
)

"""The Python lines one call of host code runs: its loops' trip counts, exactly.

A backend written in NumPy, SciPy or Numba has no XLA program to count; what it does per
call is Python calling into a library. One extra call runs under ``sys.settrace`` and
counts the line events of the backend's own code: every frame whose module is not the
standard library, an installed package (``site-packages``) or scanbench's engine (the
bundled scenarios count: they are a backend's own code). Library frames are not traced
inside, so a NumPy or LAPACK call is one line of the loop that makes it.

The most executed line that is not a loop header (a ``for`` line runs once more than its
body) is the innermost loop's body: its count is the loop's trip count per call
(deterministic, like the other counts), and the diagnosis prices that many
calls into the library at the run's measured cost of one (``rates.numpy_call_s``). The
trace costs about a microsecond per line, so the call runs apart from the timed ones
and from the counted call whose spans the decomposition reads.
"""

from __future__ import annotations

import collections
import dataclasses
import linecache
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path
from typing import Any

HOTTEST = 3  # lines kept, most executed first
LOOP_HEADERS = ("for ", "while ", "async for ")  # run once more than their body: not kept
_LIBRARY_ROOTS = tuple(
    str(Path(path).resolve())
    for key in ("stdlib", "platstdlib", "purelib", "platlib")
    if (path := sysconfig.get_paths().get(key))
)
_ENGINE = str(Path(__file__).resolve().parent.parent)  # scanbench's own package
_SCENARIOS = ("scanbench.scenarios", "scenarios")


@dataclasses.dataclass(frozen=True)
class Lines:
    """Line events of the backend's own code in one call."""

    lines: int  # lines executed
    hottest: tuple[tuple[str, int, str], ...]  # (file:line, count, source), most first

    def to_json(self) -> dict[str, Any]:
        return {
            "lines": self.lines,
            "hottest": [
                {"where": where, "count": count, "code": code}
                for where, count, code in self.hottest
            ],
        }


def is_own(filename: str, module: str) -> bool:
    """Whether a frame is the backend's own code (see the module doc)."""
    if module.startswith(_SCENARIOS):
        return True
    if filename.startswith("<frozen"):  # the interpreter's own modules
        return False
    path = str(Path(filename).resolve())
    if path.startswith(_ENGINE) and not module.startswith(_SCENARIOS):
        return False
    return not path.startswith(_LIBRARY_ROOTS)


def count_lines(call: Callable[[], Any], own: Callable[[str, str], bool] = is_own) -> Lines:
    """The line events of ``call()``'s own code on this thread (see the module doc)."""
    counts: collections.Counter[tuple[str, int]] = collections.Counter()
    verdicts: dict[tuple[str, str], bool] = {}

    def local(frame, event, arg):
        if event == "line":
            counts[(frame.f_code.co_filename, frame.f_lineno)] += 1
        return local

    def tracer(frame, event, arg):
        code = frame.f_code
        key = (code.co_filename, frame.f_globals.get("__name__", ""))
        if key not in verdicts:
            verdicts[key] = own(*key)
        return local if verdicts[key] else None

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        call()
    finally:
        sys.settrace(previous)
    ranked = (
        (f"{Path(filename).name}:{line}", count, linecache.getline(filename, line).strip())
        for (filename, line), count in counts.most_common()
    )
    bodies = [line for line in ranked if not line[2].startswith(LOOP_HEADERS)]
    return Lines(sum(counts.values()), tuple(bodies[:HOTTEST]))

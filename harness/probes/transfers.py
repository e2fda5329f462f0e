"""Host<->device transfer counts under ``jax.transfer_guard("log_explicit")``.

JAX logs every guarded transfer through its C++ logger (``guard_lib.cc``) on file
descriptor 2, so the probe points fd 2 at a temp file around the calls and parses it.
Refusals instead of silent zeros:
- if ``TF_CPP_MIN_LOG_LEVEL`` >= 2 the warnings are suppressed: the probe raises;
- before counting, a known transfer is made under the guard; if it is not seen in the
  log the probe raises (the log is hidden some other way);
- device-to-host on CPU is zero-copy (NumPy views the buffer): JAX does not log it, and
  it is reported as ``"zero-copy on CPU"``, not as 0.

Bytes come from the logged ``aval`` (dtype and shape). Transfers made by the C++ fast
path of a jitted call (a NumPy argument) are logged without an aval: they are counted,
and reported as ``*_unknown_size``.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np

from ..api import HarnessError

_LINE = re.compile(
    r"(?P<kind>host-to-device|device-to-host|device-to-device) transfer:"
    r"(?: aval=ShapedArray\((?P<dtype>[a-z0-9_]+)\[(?P<shape>[0-9,]*)\])?"
)
CPU_D2H_NOTE = "zero-copy on CPU"


class TransferProbeError(HarnessError):
    """The transfer log cannot be seen, so counting would report a false 0."""


@dataclasses.dataclass(frozen=True)
class TransferCounts:
    h2d: int
    h2d_bytes: int
    h2d_unknown_size: int
    d2h: int | None
    d2h_bytes: int | None
    d2h_unknown_size: int | None
    d2d: int
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _nbytes(dtype: str, shape: str) -> int:
    elements = int(np.prod([int(s) for s in shape.split(",") if s])) if shape else 1
    return elements * np.dtype(dtype).itemsize


def parse_log(text: str, platform: str) -> TransferCounts:
    """Count the transfer lines of a captured log (pure)."""
    count: collections.Counter[str] = collections.Counter()
    size: collections.Counter[str] = collections.Counter()
    unknown: collections.Counter[str] = collections.Counter()
    for match in _LINE.finditer(text):
        kind = match.group("kind")
        count[kind] += 1
        if match.group("dtype"):
            size[kind] += _nbytes(match.group("dtype"), match.group("shape"))
        else:
            unknown[kind] += 1
    zero_copy = platform == "cpu"
    return TransferCounts(
        h2d=count["host-to-device"],
        h2d_bytes=size["host-to-device"],
        h2d_unknown_size=unknown["host-to-device"],
        d2h=None if zero_copy else count["device-to-host"],
        d2h_bytes=None if zero_copy else size["device-to-host"],
        d2h_unknown_size=None if zero_copy else unknown["device-to-host"],
        d2d=count["device-to-device"],
        note=CPU_D2H_NOTE if zero_copy else "",
    )


@contextlib.contextmanager
def captured_fd2() -> Iterator[list[str]]:
    """Redirect file descriptor 2 to a temp file; the list gets its text on exit."""
    out: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield out
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            out.append(sink.read().decode("utf-8", errors="replace"))


def _check_visible() -> None:
    level = os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0")
    if level.strip() not in ("", "0", "1"):
        raise TransferProbeError(
            f"TF_CPP_MIN_LOG_LEVEL={level} hides the transfer log; unset it or set it to 0 "
            "to count transfers"
        )


def count_transfers(call: Callable[[], Any], platform: str, calls: int = 1) -> TransferCounts:
    """Run ``call()`` ``calls`` times under the transfer guard and count its transfers."""
    _check_visible()
    with captured_fd2() as probe_log, jax.transfer_guard("log_explicit"):
        jax.block_until_ready(jax.device_put(np.zeros(3, np.float32)))
    if parse_log(probe_log[0], platform).h2d < 1:
        raise TransferProbeError(
            "a known host-to-device transfer was not logged under "
            "jax.transfer_guard('log_explicit'); the C++ log is hidden, cannot count"
        )
    with captured_fd2() as log, jax.transfer_guard("log_explicit"):
        for _ in range(calls):
            jax.block_until_ready(call())
    return parse_log(log[0], platform)

"""How a reader gets a trace of the call a diagnosis is about, from where they are.

A diagnosis that cannot name a cause sends the reader to a trace. The call that writes one
depends on where the reader is: a `scanbench run` cell is traced by ``scanbench profile
--scenario ... --backend ...``; a function measured in Python (`scanbench.compare`, the
pytest fixture) has no scenario for that command and is traced by
``scanbench.profile(fn, *args, trace=True)``; and `scanbench profile` and
``scanbench.profile(..., trace=...)`` have written the trace already, so their advice names
it. The rules (`scanbench.diagnosis`, `scanbench.evidence`) read a `TraceRoute` from their
facts and say ``route.find_out()`` or ``route.look()``; whoever builds the facts knows where
the reader is.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import shlex
from collections.abc import Mapping

GENERIC = "scanbench profile"  # where no cell is known (a gate's count, an old caller)


@dataclasses.dataclass(frozen=True)
class TraceRoute:
    """The call that writes a trace of the diagnosed call, as the reader types it, or the
    path of the trace already written (then no call is suggested)."""

    call: str = GENERIC
    written: str | None = None

    @classmethod
    def command(
        cls,
        scenario: str,
        backend: str,
        size: str,
        dtype: str | None = None,
        params: Mapping[str, object] | None = None,
    ) -> TraceRoute:
        """``scanbench profile`` of one cell of a run: ``scenario`` as the command takes it
        (a catalogue name or a source)."""
        words = ["scanbench", "profile", "--scenario", scenario, "--backend", backend]
        words += ["--size", size]
        if dtype:
            words += ["--dtype", dtype]
        for name, value in (params or {}).items():
            words += ["--param", f"{name}={value}"]
        return cls(shlex.join(words))

    @classmethod
    def python(cls, function: str) -> TraceRoute:
        """``scanbench.profile`` of a function measured in Python, named as the table
        names it (``fn`` when that name is not a Python name)."""
        name = function if function.isidentifier() else "fn"
        return cls(f"scanbench.profile({name}, *args, trace=True)")

    @classmethod
    def at(cls, path: str) -> TraceRoute:
        """The trace written at ``path``: the advice of the call that wrote it."""
        return cls(call="", written=path)

    def find_out(self) -> str:
        """The start of a fix sentence: "find out with `CALL`" or "find out in the trace
        at PATH"."""
        if self.written:
            return f"find out in the trace at {self.written}"
        return f"find out with `{self.call}`"

    def look(self) -> str:
        """ "look at the trace (`CALL`)" or "look at the trace at PATH"."""
        if self.written:
            return f"look at the trace at {self.written}"
        return f"look at the trace (`{self.call}`)"


UNNAMED = TraceRoute()  # the command, where the facts name no cell (the default)


@dataclasses.dataclass(frozen=True)
class TraceFiles:
    """A trace `recording` kept: its folder (XProf/TensorBoard's ``--logdir``) and the
    newest Perfetto file under it (None when the profiler wrote none)."""

    directory: str
    perfetto: str | None

    @classmethod
    def found(cls, directory: str | os.PathLike[str]) -> TraceFiles:
        """The trace files under ``directory``, as absolute paths."""
        folder = os.path.abspath(directory)
        files = glob.glob(os.path.join(folder, "**", "perfetto_trace.json.gz"), recursive=True)
        return cls(folder, max(files, key=os.path.getmtime) if files else None)

    def lines(self) -> list[str]:
        """Where each viewer opens it."""
        perfetto = self.perfetto or "none written"
        return [
            f"  XProf/TensorBoard: --logdir {self.directory}",
            f"  Perfetto (ui.perfetto.dev): {perfetto}",
        ]

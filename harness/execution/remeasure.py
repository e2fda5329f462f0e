"""A disturbed cell is measured again: the first undisturbed measurement is kept, and
the ones set aside are stored with it.

A cell is *disturbed* when the machine was busy while it ran or its samples had a slow
spell (`scanbench.execution.interference`). Its median may then describe the disturbance
rather than the code, so the run measures it again, in a fresh worker as the first time,
up to ``times`` more times, unless the programs that disturbed it are still running right
after it (`scanbench.execution.interference.still_busy`: the reason is added to the cell's,
and it is not measured again), and keeps:

- the first measurement that is not disturbed;
- else (every measurement disturbed) the last one that succeeded, still marked
  disturbed: the reports say so and the gate does not decide on it.

Before that, inside the worker, samples with a slow spell, or over which the runner's
probes found the machine disturbed (`scanbench.execution.overlap`: its answer when the
samples end), are set aside and the call sampled again up to ``times`` times
(`scanbench.execution.worker`): the cheaper remedy, since a fresh worker compiles again.
`resampled` moves those samples, with the runner's verdict on each, into the record's
``interference.set_aside`` like the rest.

Nothing measured is dropped: each measurement set aside is stored in the kept record's
``interference.set_aside`` (its status and error, what disturbed it, its samples and
median), and the wall time they took is a stage of the cell's run time. Only timed cells
are measured again: a failed or skipped cell, or one counted and not timed, is what it is.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from ..api import Record
from ..invocation import REMEASURE
from ..spells import SlowSpell
from ..stages import SAMPLING_STAGE
from .interference import Interference, SetAside

__all__ = [
    "REMEASURE",
    "needs_another",
    "remeasured",
    "resampled",
    "sampled_again",
    "set_aside",
    "with_window",
]

SET_ASIDE_STAGE = "measured again (disturbed measurements set aside)"
SAMPLED_AGAIN = "sampled again in the same worker"


MACHINE_DISTURBED = "the runner's probes found the machine disturbed"


def sampled_again(samples: tuple[float, ...], spell: SlowSpell | None) -> SetAside:
    """A sampling set aside inside its worker for its slow ``spell``, or (None) because
    the runner's probes found the machine disturbed over it (`resampled` then adds their
    verdict); the worker then samples the call again: a measurement set aside like a
    whole worker's."""
    why = spell.describe() if spell is not None else MACHINE_DISTURBED
    verdict = Interference(slow_spell=spell, disturbed=True, reasons=(f"{why}; {SAMPLED_AGAIN}",))
    return SetAside(
        status="ok",
        interference=verdict,
        samples_s=samples,
        median_s=statistics.median(samples) if samples else None,
        wall_s=sum(samples),
    )


def with_window(aside: SetAside, window: dict[str, Any] | None) -> SetAside:
    """A sampling set aside in its worker, with the runner's verdict on it (``window``,
    `scanbench.execution.overlap.Worker.windows`: the probes, load and steal over its
    samples, JSON): those values, the worker's slow spell, the reasons of both (the
    spell's first, the first saying it was sampled again)."""
    if window is None:
        return aside
    machine = Interference.from_json(dict(window))
    own = aside.interference or Interference()
    spell = own.slow_spell
    reasons = [*([spell.describe()] if spell is not None else []), *machine.reasons]
    reasons = reasons or [MACHINE_DISTURBED]
    reasons[0] = f"{reasons[0]}; {SAMPLED_AGAIN}"
    verdict = dataclasses.replace(
        machine, slow_spell=spell, disturbed=True, reasons=tuple(reasons), set_aside=()
    )
    return dataclasses.replace(aside, interference=verdict)


def resampled(
    record: Record, interference: dict[str, Any], windows: Sequence[dict[str, Any]] = ()
) -> tuple[Record, dict[str, Any]]:
    """``record`` without the samplings its worker set aside (``sampling["set_aside"]``,
    each a `sampled_again`, paired in order with the runner's verdict on it in
    ``windows``: `with_window`), and ``interference`` (JSON) with them among its
    measurements set aside; the time they took moves from the sampling stage to that of
    measurements set aside."""
    taken = (record.sampling or {}).get("set_aside") or ()
    if not taken:
        return record, interference
    aside = tuple(
        with_window(SetAside.from_json(dict(sampling)), windows[i] if i < len(windows) else None)
        for i, sampling in enumerate(taken)
    )
    spent = sum(attempt.wall_s or 0.0 for attempt in aside)
    phases = dict(record.extra.get("phases_s") or {})
    phases[SAMPLING_STAGE] = max(0.0, phases.get(SAMPLING_STAGE, 0.0) - spent)
    phases[SET_ASIDE_STAGE] = phases.get(SET_ASIDE_STAGE, 0.0) + spent
    sampling = {key: value for key, value in record.sampling.items() if key != "set_aside"}
    record = dataclasses.replace(
        record, sampling=sampling, extra={**record.extra, "phases_s": phases}
    )
    kept = Interference.from_json(dict(interference or {}))
    kept = dataclasses.replace(kept, set_aside=(*kept.set_aside, *aside))
    return record, kept.to_json()


def needs_another(record: Record) -> bool:
    """A timed cell whose measurement was disturbed."""
    return record.status == "ok" and bool(record.samples_s) and record.disturbed


def set_aside(record: Record) -> SetAside:
    """What a measurement set aside keeps of the record."""
    interference = (
        Interference.from_json(dict(record.interference)) if record.interference else None
    )
    if interference is not None:  # its worker's own set-aside samples are listed beside it
        interference = dataclasses.replace(interference, set_aside=())
    return SetAside(
        status=str(record.status),
        error=record.error,
        interference=interference,
        samples_s=tuple(record.samples_s),
        median_s=record.stats.get("median"),
        wall_s=sum((record.extra.get("phases_s") or {}).values()) or record.wall_s,
    )


def _reasons(record: Record) -> str:
    return "; ".join(record.interference.get("reasons", ())) or "disturbed"


def _label(record: Record) -> str:
    return f"{record.scenario}/{record.backend}/{record.size}"


def _interference(record: Record) -> Interference:
    return Interference.from_json(dict(record.interference or {}))


def _with_reason(record: Record, reason: str) -> Record:
    """``record`` with one more reason it is disturbed."""
    interference = _interference(record)
    interference = dataclasses.replace(interference, reasons=(*interference.reasons, reason))
    return dataclasses.replace(record, interference=interference.to_json())


def remeasured(
    measure_once: Callable[[], Record],
    times: int = REMEASURE,
    emit: Callable[[str], None] | None = None,
    still_busy: Callable[[Interference], str | None] | None = None,
) -> Record:
    """``measure_once()``, again while the cell is disturbed, up to ``times`` more times
    (see the module doc for which measurement is kept); ``emit`` gets a line each time
    the cell is measured again. Before measuring again, ``still_busy(interference)``
    (`scanbench.execution.interference.still_busy` in a run) may say why the next
    measurement would be disturbed the same way: then the cell is not measured again and
    that reason is added to its own."""
    attempts = [measure_once()]
    while needs_another(attempts[-1]) and len(attempts) <= times:
        busy = still_busy(_interference(attempts[-1])) if still_busy is not None else None
        if busy is not None:
            attempts[-1] = _with_reason(attempts[-1], busy)
            if emit is not None:
                emit(f"{_label(attempts[-1])}: disturbed ({_reasons(attempts[-1])})")
            break
        if emit is not None:
            emit(
                f"{_label(attempts[-1])}: disturbed ({_reasons(attempts[-1])}); measuring it again "
                f"({len(attempts)} of {times})"
            )
        attempts.append(measure_once())
    if len(attempts) == 1:
        return attempts[0]
    # a measurement again that failed: the one before it is kept
    kept = len(attempts) - 1 if attempts[-1].status == "ok" else len(attempts) - 2
    others = [r for index, r in enumerate(attempts) if index != kept]
    whole = [set_aside(r) for r in others]  # each worker's whole life: its wall time
    # in the order measured: each worker's samplings set aside in it, then the worker
    aside = tuple(
        entry
        for r, w in zip(others, whole, strict=True)
        for entry in (*_interference(r).set_aside, w)
    )
    record = attempts[kept]
    interference = Interference.from_json(dict(record.interference))
    own = interference.set_aside  # set aside inside the kept worker: its time is counted
    interference = dataclasses.replace(interference, set_aside=(*aside, *own))
    phases = dict(record.extra.get("phases_s") or {})
    phases[SET_ASIDE_STAGE] = phases.get(SET_ASIDE_STAGE, 0.0) + sum(w.wall_s or 0.0 for w in whole)
    extra = {**record.extra, "phases_s": phases}
    return dataclasses.replace(record, interference=interference.to_json(), extra=extra)

"""A disturbed cell is measured again, within one budget of samplings per cell: the
first undisturbed measurement is kept, else the quietest, and the ones set aside are
stored with it.

A cell is *disturbed* when the machine was busy while it ran or its samples had a slow
spell (`scanbench.execution.interference`). Its median may then describe the disturbance
rather than the code. ``--remeasure N`` allows N samplings per cell after its first, in
all:

- inside the worker first, samples with a slow spell, or over which the runner's probes
  found the machine disturbed (`scanbench.execution.overlap`: its answer when the samples
  end), are set aside and the call sampled again, `IN_WORKER` time at most
  (`scanbench.execution.worker`): the cheaper remedy, since a fresh worker compiles
  again, but taken at once, while a spell of load may still last;
- then, after every other cell of the run has had its first measurement (a spell of
  load has had time to pass), a cell still disturbed is measured again in a fresh worker
  as the first time, with what is left of its budget (each fresh worker's first sampling
  counts one), unless the programs that disturbed it are still running
  (`scanbench.execution.interference.still_busy`: the reason is added to the cell's, and
  it is not measured again).

Of the measurements, the record kept is the first that is not disturbed, else the quietest
that succeeded (`quietness`: the fewest samples inside a slow spell, then the least load
from other programs), still marked disturbed: the reports say so and the gate does not
decide on it. A cell sampled N + 1 times is what the progress line and the report say.

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
    "IN_WORKER",
    "REMEASURE",
    "left_of",
    "needs_another",
    "quietness",
    "remeasured",
    "resampled",
    "sampled_again",
    "set_aside",
    "with_window",
]

IN_WORKER = 1  # samplings again inside one worker, at most, within the cell's budget
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


def used(record: Record) -> int:
    """Samplings of the cell already set aside (in its workers and whole workers)."""
    return len(_interference(record).set_aside)


def left_of(record: Record, times: int) -> int:
    """What is left of a budget of ``times`` samplings after the first for this cell."""
    return max(times - used(record), 0)


def quietness(record: Record) -> tuple[float, float]:
    """How disturbed a measurement was, smaller quieter: the share of its samples inside
    a slow spell, then the mean load of other programs over it."""
    interference = _interference(record)
    spell = interference.slow_spell
    share = spell.length / spell.samples if spell is not None and spell.samples else 0.0
    return share, interference.others_mean or 0.0


def remeasured(
    measure_once: Callable[[int], Record],
    times: int = REMEASURE,
    emit: Callable[[str], None] | None = None,
    still_busy: Callable[[Interference], str | None] | None = None,
    first: Record | None = None,
) -> Record:
    """``first`` (else ``measure_once(times)``), measured again in fresh workers while it
    is disturbed and its budget of ``times`` samplings after the first lasts (see the
    module doc for the budget and which measurement is kept); ``measure_once(left)``
    measures once, sampling again in its worker up to ``left`` times. ``emit`` gets a
    line each time the cell is measured again. Before measuring again,
    ``still_busy(interference)`` (`scanbench.execution.interference.still_busy` in a
    run) may say why the next measurement would be disturbed the same way: then the cell
    is not measured again and that reason is added to its own."""
    attempts = [first if first is not None else measure_once(times)]
    left = left_of(attempts[0], times)
    while needs_another(attempts[-1]) and left > 0:
        busy = still_busy(_interference(attempts[-1])) if still_busy is not None else None
        if busy is not None:
            attempts[-1] = _with_reason(attempts[-1], busy)
            if emit is not None:
                emit(f"{_label(attempts[-1])}: disturbed ({_reasons(attempts[-1])})")
            break
        sampled = times - left + 1  # samplings so far, set aside ones included
        if emit is not None:
            emit(
                f"{_label(attempts[-1])}: disturbed ({_reasons(attempts[-1])}); sampled "
                f"{sampled} time{'s' * (sampled > 1)}, measuring it again in a fresh worker "
                f"(at most {times + 1} samplings)"
            )
        attempts.append(measure_once(left - 1))
        left -= 1 + used(attempts[-1])
    if len(attempts) == 1:
        return attempts[0]
    kept = _kept(attempts)
    # in the order taken: each worker's samplings set aside in it, then the worker (its
    # whole life: its wall time) unless it is the one kept
    aside: list[SetAside] = []
    whole = []
    for index, attempt in enumerate(attempts):
        aside.extend(_interference(attempt).set_aside)
        if index != kept:
            whole.append(set_aside(attempt))
            aside.append(whole[-1])
    record = attempts[kept]
    # the kept worker's own samplings set aside: their time is in its stages already
    interference = Interference.from_json(dict(record.interference))
    interference = dataclasses.replace(interference, set_aside=tuple(aside))
    phases = dict(record.extra.get("phases_s") or {})
    phases[SET_ASIDE_STAGE] = phases.get(SET_ASIDE_STAGE, 0.0) + sum(w.wall_s or 0.0 for w in whole)
    extra = {**record.extra, "phases_s": phases}
    return dataclasses.replace(record, interference=interference.to_json(), extra=extra)


def _kept(attempts: Sequence[Record]) -> int:
    """The index of the measurement kept: the first undisturbed one that succeeded, else
    the quietest that succeeded (the first of equals), else the first."""
    timed = [i for i, r in enumerate(attempts) if r.status == "ok" and r.samples_s]
    if not timed:
        return 0
    steady = [i for i in timed if not attempts[i].disturbed]
    if steady:
        return steady[0]
    return min(timed, key=lambda i: quietness(attempts[i]))

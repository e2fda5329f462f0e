"""Seconds each cell took before, from a results file or a history: what `--shard-costs`
gives `scanbench.execution.shards.split` to balance a run's shards by."""

from __future__ import annotations

from pathlib import Path

from ..api import InputError, StoreError
from ..execution.shards import COUNTING_S, STARTUP_S, record_cost
from ..results import load_run
from ..sampling import TimingConfig
from .archive import load as load_history


def earlier_costs(
    path: str | Path, timing: TimingConfig, probes: bool
) -> tuple[dict[tuple, float], str]:
    """``{cell key: seconds}`` measured before, and how to name their origin: a results
    file (`record_cost`), or a history directory (per cell its newest entry's median x
    samples plus the model's fixed part).

    Raises:
        InputError: the path is neither.
    """
    source = Path(path)
    if source.is_dir():
        history = load_history(source)
        newest: dict[tuple, tuple[str, float]] = {}
        fixed = STARTUP_S + (COUNTING_S if probes else 0.0)
        for entry in history.entries:
            for point in entry.cells:
                if not point.timed:
                    continue
                key = _point_key(point)
                when = entry.measured_at or ""
                seconds = fixed + point.median * max(point.samples, 1)
                if key not in newest or when >= newest[key][0]:
                    newest[key] = (when, min(seconds, fixed + timing.max_time_s * 2))
        return {key: seconds for key, (_, seconds) in newest.items()}, f"history {source.name}"
    try:
        run = load_run(source)
    except StoreError as error:
        raise InputError(
            f"--shard-costs {str(path)!r}: give a results file or a history directory ({error})"
        ) from None
    costs = {}
    for record in run.records:
        seconds = record_cost(record)
        if seconds is not None:
            costs[record.key] = seconds
    return costs, f"results {source.name}"


def _point_key(point) -> tuple:
    """`scanbench.api.Record.key` of a history cell."""
    key = (point.scenario, point.backend, point.size, point.dtype, point.seed, point.devices)
    key = (*key, tuple(sorted(point.params))) if point.params else key
    return key if point.cache == "warm" else (*key, point.cache)

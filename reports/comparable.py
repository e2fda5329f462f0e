"""Which stored runs a report may put in one table, and why the others stand apart.

Runs from different machines merge: their records are grouped by device. A file of another
schema version, or records whose size has other parameters than the first run's (same size
name, different workload), or records measured with another jax version on the same device,
are not compared: the report lists them apart with the reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pandas as pd

from scanbench.api import StoreError
from scanbench.results import Run, SchemaVersionError, load_run


@dataclasses.dataclass(frozen=True)
class Apart:
    """Something the report shows apart instead of comparing: what, and why."""

    what: str
    reason: str


def load_runs(paths: Sequence[str]) -> tuple[list[Run], list[Apart]]:
    """Load results files; files of another schema version are set apart, not fatal.

    Raises:
        StoreError: for a file that is not a readable scanbench results file at all, or
            when no file given is of this schema version (there would be nothing to show).
    """
    runs, apart = [], []
    for path in paths:
        try:
            runs.append(load_run(path))
        except SchemaVersionError as error:
            apart.append(Apart(str(path), str(error)))
    if not runs:
        raise StoreError("; ".join(item.reason for item in apart) or "no results files given")
    return runs, apart


def split_comparable(
    frame: pd.DataFrame, mixed_versions: bool = False
) -> tuple[pd.DataFrame, list[Apart]]:
    """Rows that can share tables, and what is set apart (with the reason).

    The first run (in the order given) that measured a scenario, size and dtype fixes its
    parameters; the first run measured on a device fixes the jax version for that device.
    """
    if frame.empty:
        return frame, []
    keep = pd.Series(True, index=frame.index)
    apart = []
    checks = [(["scenario", "size", "dtype"], "size_params", "size parameters")]
    if not mixed_versions:
        checks.append((["scenario", "size", "dtype", "device"], "jax", "jax version"))
    for keys, column, label in checks:
        for key, group in frame[keep].groupby(keys, sort=False):
            first = group.sort_values("run").iloc[0]
            for run, rows in group[group[column] != first[column]].groupby("run"):
                keep[rows.index] = False
                hint = "" if column == "size_params" else " (--mixed-versions compares anyway)"
                apart.append(
                    Apart(
                        f"run {run}: {' / '.join(map(str, key))}",
                        f"{label} {rows[column].iloc[0]} differ from run {first['run']}'s "
                        f"{first[column]}{hint}",
                    )
                )
    return frame[keep], apart

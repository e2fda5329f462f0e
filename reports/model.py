"""The report model: everything a report shows, built once from stored runs; the
markdown (`scanbench.reports.markdown`) and HTML (`scanbench.reports.html`) renderers only choose
the markup.

Example:
    >>> report = build([load_run("results/run.json")])
    >>> text = markdown.render(report)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pandas as pd

from scanbench.results import Run

from .comparable import Apart, split_comparable
from .frame import records_frame
from .growth_section import GrowthSection, growth_sections, is_grown, own_sentences
from .scaling import scaling_tables
from .tables import (
    COLUMN_HELP,
    at_a_glance,
    compile_notes,
    counts_table,
    disturbed_notes,
    environment_lines,
    flag_notes,
    linear_notes,
    memory_notes,
    memory_table,
    problems,
    run_time_note,
    run_time_table,
    scaled_notes,
    shard_notes,
    tables,
    timing_table,
    unreliable_notes,
    warmup_notes,
)


@dataclasses.dataclass(frozen=True)
class Table:
    """One scenario / size / dtype / device of a report."""

    title: str
    scenario: str
    rows: pd.DataFrame  # every record of the table (rows of `scanbench.reports.frame`)
    ok: pd.DataFrame  # those that ran
    timing: pd.DataFrame | None  # formatted tables, None when nothing ran / was counted
    notes: tuple[str, ...]  # cells measured while disturbed, on part of the work, unwarmed
    counts: pd.DataFrame | None
    linear_notes: tuple[str, ...]  # notes under the counts table (extrapolated, unreliable)
    memory: pd.DataFrame | None
    memory_notes: tuple[str, ...]
    problems: tuple[tuple[str, str, str], ...]  # (backend, status, first line of the error)
    diagnoses: tuple[tuple[str, str], ...] = ()  # (backend, the dominant cost and its fix)


@dataclasses.dataclass(frozen=True)
class ScalingTable:
    title: str
    rows: pd.DataFrame
    table: pd.DataFrame


@dataclasses.dataclass(frozen=True)
class Report:
    frame: pd.DataFrame  # the comparable records (`scanbench.reports.frame.records_frame`)
    glance: pd.DataFrame
    tables: tuple[Table, ...]
    scaling: tuple[ScalingTable, ...]
    run_time: pd.DataFrame | None
    apart: tuple[Apart, ...]
    environment: tuple[str, ...]
    column_help: str = COLUMN_HELP
    run_time_note: str = ""  # what the run-time table's shares are of
    growth: tuple[
        GrowthSection, ...
    ] = ()  # the sweeps of grown runs (scanbench.reports.growth_section)

    def scenarios(self) -> list[tuple[str, pd.DataFrame, list[Table]]]:
        """(scenario, its ok rows, its tables), in the order first measured."""
        if self.frame.empty:
            return []
        ok = self.frame[(self.frame["status"] == "ok") & ~self.frame["size"].map(is_grown)]
        return [
            (name, ok[ok["scenario"] == name], [t for t in self.tables if t.scenario == name])
            for name in dict.fromkeys(self.frame["scenario"])
        ]


def _table(title: str, group: pd.DataFrame) -> Table:
    ok = group[group["status"] == "ok"]
    counted = not ok.empty and ok["dispatches"].notna().any()
    measured_memory = not ok.empty and ok["mem_peak"].notna().any()
    return Table(
        title=title,
        scenario=str(group["scenario"].iloc[0]),
        rows=group,
        ok=ok,
        timing=timing_table(ok) if not ok.empty else None,
        notes=tuple(
            disturbed_notes(ok)
            + scaled_notes(ok)
            + warmup_notes(ok)
            + flag_notes(ok)
            + shard_notes(ok)
            + compile_notes(ok)
        ),
        counts=counts_table(ok) if counted else None,
        linear_notes=tuple(linear_notes(ok) + unreliable_notes(ok)) if counted else (),
        memory=memory_table(ok) if measured_memory else None,
        memory_notes=tuple(memory_notes(ok)) if measured_memory else (),
        problems=tuple(problems(group)),
        diagnoses=tuple((row.backend, row.diagnosis) for row in ok.itertuples() if row.diagnosis),
    )


def build(runs: Sequence[Run], apart: Sequence[Apart] = (), mixed_versions: bool = False) -> Report:
    """The report of ``runs``: what can be compared in tables, the rest set apart."""
    frame, not_compared = split_comparable(records_frame(runs), mixed_versions)
    run_time = run_time_table(frame) if not frame.empty else None
    # a sweep's points are shown by its growth section, not as a table per point
    sized = frame if frame.empty else frame[~frame["size"].map(is_grown)]
    growth = tuple(growth_sections(runs))
    return Report(
        frame=frame,
        glance=at_a_glance(sized),
        tables=tuple(_with_growth(_table(t, g), growth) for t, g in tables(sized)),
        scaling=tuple(ScalingTable(*parts) for parts in scaling_tables(sized)),
        run_time=None if run_time is None or run_time.empty else run_time,
        run_time_note="" if frame.empty else run_time_note(frame),
        apart=(*apart, *not_compared),
        environment=tuple(environment_lines(runs)),
        growth=growth,
    )


def _with_growth(table: Table, growth: Sequence[GrowthSection]) -> Table:
    """The table of a sweep's base size, with what the sweep says about that size."""
    said = own_sentences(growth)
    key = (table.scenario, str(table.rows["size"].iloc[0]))
    found = [
        ("growth", text)
        for run in dict.fromkeys(table.rows["run"])
        for text in said.get((int(run), *key), [])
    ]
    return dataclasses.replace(table, diagnoses=(*table.diagnoses, *found)) if found else table

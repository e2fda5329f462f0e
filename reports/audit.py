"""Each "a faster backend" sentence read against its own table, as a reviewer would.

A lead that names a faster neighbour (`scanbench.findings.Neighbour`), or a located cause
that such a neighbour backs, cites figures of two rows of the same table. `audit` takes
every such sentence of a report and recomputes what it cites from the rows alone:

- the neighbour is an ``ok`` row of the same table, and faster;
- the ratio it cites is this row's median / the neighbour's (to the two decimals shown);
- the gap per call it prices is the difference of the two medians;
- the shares of the gap it names sum to at most 100%;
- a neighbour pooled on more cores (`CORES_DIFFER` or more, the report's pools) is
  said to run on them;
- where either row had a flagged slow spell, the ratio of their medians outside it is
  still at least `FASTER_BY` (a neighbour from a spell's samples is no neighbour);
- "donate the output" is offered for fresh memory only where the cell's output is at
  least as large as its XLA temporaries (the memory probe's bytes, not the rule's pick).

`audit_memory` reads every "memory-bound" lead the same way: its share at most 100%,
"allocate the output once" only where the output is at least its temporaries.

It also says how much of the gap the named differences account for (``explained``; all
of it for waits priced by the same loop without them, which differs only in the waits),
so a results file tells how often a lead says *why* (`EXPLAINS` or more: a mechanism
that explains at least half the gap). Numbers only; the manual renders them
(docs/counts-and-diagnosis.md, "How often a lead says why").
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from scanbench.diagnosis import CORES_DIFFER, FASTER_BY
from scanbench.findings import EXPLAINS, Finding, Neighbour

from .frame import pool_cores
from .model import Report

DONATE_OUTPUT = "allocate the output once"  # the fresh-memory fix for an output's pages


@dataclasses.dataclass(frozen=True)
class LeadAudit:
    """One sentence that names a faster neighbour, checked against its table."""

    scenario: str
    size: str
    backend: str
    neighbour: str
    ratio: float  # as cited
    gap_s: float | None  # as priced (None: no gap priced)
    explained: float  # the share of the gap the named differences account for
    largest: str  # the mechanism of the largest difference ("" when none)
    problems: tuple[str, ...]  # the figures that do not match the table

    @property
    def says_why(self) -> bool:
        """Whether a named difference explains at least `EXPLAINS` of the gap."""
        return self.explained >= EXPLAINS


def _named(findings: Iterable[Finding]) -> tuple[Finding, Neighbour] | None:
    """The lead's neighbour: the lead's own, or the one that backs a located lead."""
    findings = tuple(findings)
    if not findings:
        return None
    lead = findings[0]
    return None if lead.neighbour is None else (lead, lead.neighbour)


def _row_of(rows: pd.DataFrame, name: str) -> pd.Series | None:
    for column in ("backend", "backend_name"):
        if column in rows and (rows[column] == name).any():
            return rows[rows[column] == name].iloc[0]
    return None


def _check(row: pd.Series, lead: Finding, neighbour: Neighbour, rows: pd.DataFrame) -> list[str]:
    problems = []
    theirs = _row_of(rows, neighbour.name)
    if theirs is None or theirs.get("status") != "ok":
        return [f"{neighbour.name} is not an ok row of the table"]
    mine_s, theirs_s = float(row["median_s"]), float(theirs["median_s"])
    if not theirs_s < mine_s:
        problems.append(f"{neighbour.name} is not faster ({theirs_s:.3g} s vs {mine_s:.3g} s)")
    if f"{mine_s / theirs_s:.2f}" != f"{neighbour.ratio:.2f}":
        problems.append(
            f"ratio {neighbour.ratio:.2f}x cited, the medians give {mine_s / theirs_s:.2f}x"
        )
    mine_pool, theirs_pool = pool_cores(row), pool_cores(theirs)
    said = neighbour.cores is not None and (
        abs(neighbour.cores[0].count - neighbour.cores[1].count) >= CORES_DIFFER
    )
    if theirs_pool - mine_pool >= CORES_DIFFER and not said:
        problems.append(
            f"{neighbour.name} is pooled on more cores ({theirs_pool:.1f} vs "
            f"{mine_pool:.1f}) and the sentence does not say so"
        )
    if row.get("spell") is not None or theirs.get("spell") is not None:
        clean = float(np.median(row["clean_samples_s"])) / float(
            np.median(theirs["clean_samples_s"])
        )
        if clean < FASTER_BY:
            problems.append(
                f"outside the slow spell the medians give {clean:.2f}x, under {FASTER_BY}x"
            )
    gap = neighbour.gap
    if gap is not None:
        if not math.isclose(gap.seconds, mine_s - theirs_s, rel_tol=1e-9):
            problems.append(
                f"gap {gap.seconds:.3g} s priced, the medians differ by {mine_s - theirs_s:.3g} s"
            )
        total = sum(d.share for d in gap.differences)
        if total > 1.0 + 1e-9:
            problems.append(f"the shares of the gap sum to {total:.0%}")
        output, temporaries = row.get("mem_output"), row.get("mem_temp")
        for difference in gap.differences:
            if difference.fix.startswith(DONATE_OUTPUT) and output is not None:
                output, temporaries = float(output), float(temporaries or 0)
                if output < temporaries:
                    problems.append(
                        f"'donate the output' for {output / 1e6:,.1f} MB of output beside "
                        f"{temporaries / 1e6:,.1f} MB of temporaries"
                    )
    return problems


def audit(report: Report) -> tuple[LeadAudit, ...]:
    """Every sentence of ``report`` that names a faster neighbour, checked (module doc)."""
    found = []
    for table in report.tables:
        rows = table.rows
        for _, row in rows.iterrows():
            named = _named(row.get("findings") or ())
            if named is None:
                continue
            lead, neighbour = named
            gap = neighbour.gap
            largest = gap.largest if gap is not None else None
            # waits priced by the same loop without them (the same dispatches and kernels,
            # `scanbench.reports.frame._without_waits`): the waits are the whole gap
            twin = lead.cost.value == "sync-bound" and gap is None and lead.share is not None
            found.append(
                LeadAudit(
                    scenario=str(row["scenario"]),
                    size=str(row["size"]),
                    backend=str(row["backend"]),
                    neighbour=neighbour.name,
                    ratio=neighbour.ratio,
                    gap_s=None if gap is None else gap.seconds,
                    explained=1.0 if twin else 0.0 if gap is None else gap.explained,
                    largest="waits" if twin else "" if largest is None else largest.mechanism,
                    problems=tuple(_check(row, lead, neighbour, rows)),
                )
            )
    return tuple(found)


def audit_memory(report: Report) -> tuple[tuple[str, str, str, str], ...]:
    """Every "memory-bound" lead whose fix does not follow where its fresh bytes come
    from: (scenario, size, backend, problem). "Allocate the output once" is offered only
    where the cell's output is at least as large as its XLA temporaries (the memory
    probe's bytes), and a memory-bound share is never past 100%."""
    found = []
    for table in report.tables:
        for _, row in table.rows.iterrows():
            findings = tuple(row.get("findings") or ())
            if not findings or findings[0].cost.value != "memory-bound":
                continue
            lead = findings[0]
            where = (str(row["scenario"]), str(row["size"]), str(row["backend"]))
            if lead.share > 1.0 + 1e-9:
                found.append((*where, f"memory-bound share {lead.share:.0%}"))
            output, temporaries = row.get("mem_output"), row.get("mem_temp")
            donates = lead.fix.startswith(DONATE_OUTPUT) and output is not None
            if donates and float(output) < float(temporaries or 0):
                found.append(
                    (
                        *where,
                        f"'donate the output' for {float(output) / 1e6:,.1f} MB of "
                        f"output beside {float(temporaries) / 1e6:,.1f} MB of temporaries",
                    )
                )
    return tuple(found)

"""Every "a faster backend" sentence of the committed results, read against its table
(`scanbench.reports.audit`), and the audit shown to fail on a sentence that lies."""

from __future__ import annotations

import dataclasses
import functools

import pytest

from scanbench.diagnosis import Cost
from scanbench.findings import Difference
from scanbench.reports.audit import audit, audit_memory
from scanbench.reports.model import Report, Table, build
from scanbench.results import load_run
from tests.support.paths import REPO_ROOT

COMMITTED = ("smoke", "default")


@functools.cache
def _report(name: str) -> Report:
    return build([load_run(REPO_ROOT / "docs" / "results" / f"{name}.json")])


@pytest.mark.parametrize("name", COMMITTED)
def test_every_sentence_that_names_a_faster_backend_cites_its_tables_figures(name):
    audited = audit(_report(name))
    assert len(audited) >= 10, "the committed results name faster backends in most rows"
    wrong = [(a.scenario, a.backend, a.problems) for a in audited if a.problems]
    assert not wrong


def _with_rows(report: Report, index: int, change) -> Report:
    table = report.tables[index]
    rows = change(table.rows.copy())
    tables = list(report.tables)
    tables[index] = dataclasses.replace(table, rows=rows)
    return dataclasses.replace(report, tables=tuple(tables))


def _first_named(report: Report) -> tuple[int, str, str]:
    """(table index, backend, neighbour) of the first sentence with a priced gap."""
    for index, table in enumerate(report.tables):
        for _, row in table.rows.iterrows():
            findings = row.get("findings") or ()
            if findings and findings[0].neighbour is not None and findings[0].neighbour.gap:
                return index, str(row["backend"]), findings[0].neighbour.name
    raise AssertionError("no sentence names a faster backend with a priced gap")


def test_a_ratio_or_gap_that_is_not_the_tables_is_caught():
    report = _report("smoke")
    index, backend, neighbour = _first_named(report)

    def slower_neighbour(rows):
        at = rows["backend"] == neighbour
        rows.loc[at, "median_s"] = rows.loc[at, "median_s"] * 1.5
        return rows

    problems = next(
        a.problems
        for a in audit(_with_rows(report, index, slower_neighbour))
        if a.backend == backend
    )
    assert any(p.startswith("ratio") for p in problems), problems
    assert any(p.startswith("gap") for p in problems), problems


def test_donating_the_output_beside_larger_temporaries_is_caught():
    """The fix "allocate the output once and donate it" where XLA's temporaries, not the
    output, are most of the fresh bytes (issue 66: vmapped, 483 of 563 MB temporaries):
    planted on a committed sentence, with the memory probe's bytes of that cell."""
    report = _report("smoke")
    index, backend, _ = _first_named(report)
    donate = Difference(
        "fresh memory", 1e-3, 0.5, "planted", "allocate the output once and donate it"
    )

    def donating(rows, output, temporaries):
        at = rows.index[rows["backend"] == backend][0]
        lead, *rest = rows.at[at, "findings"]
        gap = dataclasses.replace(lead.neighbour.gap, differences=(donate,))
        neighbour = dataclasses.replace(lead.neighbour, gap=gap)
        rows.at[at, "findings"] = (dataclasses.replace(lead, neighbour=neighbour), *rest)
        rows.at[at, "mem_output"], rows.at[at, "mem_temp"] = output, temporaries
        return rows

    def problems(output, temporaries):
        changed = _with_rows(report, index, lambda rows: donating(rows, output, temporaries))
        return next(a.problems for a in audit(changed) if a.backend == backend)

    assert any("donate the output" in p for p in problems(80e6, 483e6))
    assert not any("donate the output" in p for p in problems(483e6, 80e6))


def test_how_much_of_its_gap_a_sentence_explains_is_counted():
    audited = audit(_report("smoke"))
    assert all(0.0 <= a.explained <= 1.0 for a in audited)
    assert any(a.says_why for a in audited) and not all(a.says_why for a in audited)
    assert isinstance(_report("smoke").tables[0], Table)


def test_a_neighbour_that_a_slow_spell_made_is_caught():
    """A sentence whose ratio holds only with a slow spell's samples (issue 66: 1.41x cited,
    1.09x outside the spell): planted as a spell whose other samples match the
    neighbour's."""
    report = _report("smoke")
    index, backend, neighbour = _first_named(report)

    def spelled(rows):
        at = rows.index[rows["backend"] == backend][0]
        theirs = rows.index[rows["backend"] == neighbour][0]
        rows.at[at, "spell"] = (0, 9, 2.0)
        rows.at[at, "clean_samples_s"] = rows.at[theirs, "clean_samples_s"]
        return rows

    problems = next(
        a.problems for a in audit(_with_rows(report, index, spelled)) if a.backend == backend
    )
    assert any("outside the slow spell" in p for p in problems), problems


@pytest.mark.parametrize("name", COMMITTED)
def test_every_memory_bound_lead_offers_the_fix_its_fresh_bytes_call_for(name):
    assert not audit_memory(_report(name))


def test_a_memory_bound_lead_that_donates_the_output_beside_temporaries_is_caught():
    """The fix of the committed results before issue 66 (vmapped TDMA at default: "allocate
    the output once" with 483 of 563 MB in XLA temporaries), planted as a row's lead."""
    report = _report("default")
    index, backend, _ = _first_named(report)

    def donating(rows, output, temporaries):
        at = rows.index[rows["backend"] == backend][0]
        lead, *rest = rows.at[at, "findings"]
        planted = dataclasses.replace(
            lead, cost=Cost.MEMORY, share=0.6, fix="allocate the output once and donate it"
        )
        rows.at[at, "findings"] = (planted, *rest)
        rows.at[at, "mem_output"], rows.at[at, "mem_temp"] = output, temporaries
        return rows

    def problems(output, temporaries):
        changed = _with_rows(report, index, lambda rows: donating(rows, output, temporaries))
        return [p[3] for p in audit_memory(changed)]

    assert any("donate the output" in p for p in problems(80e6, 483e6))
    assert not problems(483e6, 80e6)


def test_waits_priced_by_the_same_loop_without_them_explain_their_whole_gap():
    """sequential-jax-sync's lead prices its waits by sequential-jax, the same loop
    without them (same dispatches and kernels): the audit counts the whole gap."""
    (synced,) = [a for a in audit(_report("smoke")) if a.backend == "sequential-jax-sync"]
    assert synced.neighbour == "sequential-jax"
    assert synced.largest == "waits" and synced.explained == 1.0 and synced.says_why


def test_a_neighbour_on_more_cores_that_the_sentence_hides_is_caught():
    """A like-with-like sentence whose neighbour the report pools on more cores (issue
    66: cartpole/smoke/library named the 2-device sharded program, pooled by 0.026 of a
    core measured on a busy machine): planted as the neighbour's declared cores."""
    report = _report("smoke")
    index, backend, neighbour = _first_named(report)

    def more_cores(rows):
        theirs = rows.index[rows["backend"] == neighbour][0]
        mine = rows.index[rows["backend"] == backend][0]
        rows.at[theirs, "cores_contended"] = True
        rows.at[theirs, "cores_declared"] = float(rows.at[mine, "cores"]) + 1.0
        return rows

    named = next(a for a in audit(_report("smoke")) if a.backend == backend)
    assert not any("more cores" in p for p in named.problems)
    problems = next(
        a.problems for a in audit(_with_rows(report, index, more_cores)) if a.backend == backend
    )
    assert any("pooled on more cores" in p for p in problems), problems

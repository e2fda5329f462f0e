"""The report's figures earn their space: one size is drawn as one bar per backend, named
on its axis (not a column of dots keyed by a legend of every backend); sizes are drawn as
lines only when there are two or more."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest

from scanbench import ArchiveMap, StoreError
from scanbench.reports import html, plots
from scanbench.reports.model import build
from scanbench.results import Run, load_run, write_run
from scanbench.scenarios.qd_tuning.problem import QdResult
from scanbench.scenarios.qd_tuning.reference64 import describe
from tests.support.paths import DATA, REPO_ROOT

ROOT = REPO_ROOT
TDMA = DATA / "tdma.json"


def _one_size(run: Run, size: str = "smoke", baseline: bool = True) -> Run:
    records = tuple(r for r in run.records if r.size == size)
    invocation = run.invocation
    if not baseline:
        records = tuple(r for r in records if r.strategy != "sequential")
        facts = {
            name: dataclasses.replace(fact, baseline=None)
            for name, fact in invocation.scenarios.items()
        }
        invocation = dataclasses.replace(invocation, scenarios=facts)
    return dataclasses.replace(run, records=records, invocation=invocation)


def _alts(document: str) -> list[str]:
    return re.findall(r'<img alt="([^"]*)"', document)


def _bar_labels(plot: plots.Plot) -> list[str]:
    return [label.get_text() for label in plot.figure.axes[0].get_yticklabels()]


def test_one_size_draws_no_size_axis_and_one_bar_per_backend():
    run = _one_size(load_run(TDMA))
    report = build([run])
    alts = _alts(html.render(report))
    assert not [alt for alt in alts if alt.startswith("Time vs size")]
    assert "Speedup over sequential-jax: tridiagonal / smoke / float64 / cpu:cpu" in alts
    table = report.tables[0]
    plot = plots.time_bars(table.ok, table.title)
    assert _bar_labels(plot) == list(table.ok["backend"])  # each backend named on its axis
    legend = plot.figure.axes[0].get_legend()
    assert len(legend.get_texts()) == table.ok["strategy"].nunique()  # strategies, not backends
    slowest = table.ok.loc[table.ok["median_s"].idxmax(), "backend"]
    assert f"most: {slowest}" in plot.caption


def test_one_size_without_a_baseline_draws_the_times_as_bars():
    report = build([_one_size(load_run(TDMA), baseline=False)])
    alts = _alts(html.render(report))
    assert "Time per call: tridiagonal / smoke / float64 / cpu:cpu" in alts
    assert not [alt for alt in alts if alt.startswith(("Speedup", "Time vs size"))]


def test_bars_are_lengths_from_zero_and_two_sizes_are_lines():
    run = load_run(TDMA)
    table = build([_one_size(run)]).tables[0]
    axes = plots.time_bars(table.ok, table.title).figure.axes[0]
    assert axes.get_xscale() == "linear" and axes.get_xlim()[0] == 0
    frame = build([run]).frame
    ok = frame[frame["status"] == "ok"]
    assert plots.time_vs_size(ok, "tridiagonal / float64") is not None
    assert plots.time_vs_size(ok[ok["size"] == "smoke"], "tridiagonal / float64") is None


def _qd_output(filled: int) -> QdResult:
    """A 5 x 5 archive with its first ``filled`` cells occupied, objectives -1, -2, ..."""
    cells = 25
    occupied = np.arange(cells) < filled
    value = np.zeros((cells, 3), np.float32)
    value[:, 0] = -1.0 - np.arange(cells)
    zeros = np.zeros((2, 3), np.float32)
    return QdResult(zeros, zeros, np.zeros((cells, 3)), value, occupied, np.ones(2))


def test_a_report_draws_the_final_archive_of_each_backend(tmp_path):
    """Records whose output stores an archive (the QD scenarios' `describe`), through a
    results file: one heatmap panel per backend on one colour scale, the empty cells
    blank; a table whose records store none (plain TDMA) draws none."""
    run = _one_size(load_run(TDMA))
    records = tuple(
        dataclasses.replace(r, extra={**r.extra, "output": describe(_qd_output(3 + i))})
        for i, r in enumerate(run.records)
    )
    path = write_run(tmp_path / "qd.json", dataclasses.replace(run, records=records))
    report = build([load_run(path)])
    title = report.tables[0].title
    assert _alts(html.render(report)).count(f"Final archive: {title}") == 1
    table = report.tables[0]
    plot = plots.archive_heatmaps(table.ok, title)
    panels = [axes for axes in plot.figure.axes if axes.images]
    assert [axes.get_title().split("\n")[0] for axes in panels] == list(table.ok["backend"])
    first = panels[0].images[0].get_array()
    assert first.T[0, :3].tolist() == [-1.0, -2.0, -3.0] and first.mask.T[0, 3]
    assert {axes.images[0].get_clim() for axes in panels} == {(-2.0 - len(panels), -1.0)}
    plain = build([_one_size(load_run(TDMA))])
    assert not [alt for alt in _alts(html.render(plain)) if alt.startswith("Final archive")]


def test_an_archive_map_survives_its_record_and_refuses_what_is_not_one():
    archive = ArchiveMap(((1.0, None), (None, -2.5)), ("effort", "angle"), ((0, 1), (0.5, 1)))
    assert ArchiveMap.from_output(json.loads(json.dumps(archive.to_output()))) == archive
    assert ArchiveMap.from_output({"coverage": 0.5}) is None
    with pytest.raises(StoreError, match="'archive_map' is not an archive map"):
        ArchiveMap.from_output({"archive_map": {"objective": [[1.0], [2.0, 3.0]]}})
    with pytest.raises(ValueError, match="lower < upper"):
        ArchiveMap(((1.0,),), ("effort", "angle"), ((1, 0), (0, 1)))

"""The report's figures earn their space: one size is drawn as one bar per backend, named
on its axis (not a column of dots keyed by a legend of every backend); sizes are drawn as
lines only when there are two or more."""

from __future__ import annotations

import dataclasses
import re

from scanbench.reports import html, plots
from scanbench.reports.model import build
from scanbench.results import Run, load_run
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

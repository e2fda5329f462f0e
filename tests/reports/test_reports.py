"""Markdown and HTML reports from results files the harness wrote (tests/support/data, see
make_results.sh): tables, speedups, plots, merged devices, failed cells, runs set apart,
and the HTML rendered by a real headless Chromium."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from scanbench.cli.main import main
from scanbench.reports import html, markdown
from scanbench.reports import tables as report_tables
from scanbench.reports.model import build
from scanbench.reports.tables import format_duration, format_seconds
from scanbench.results import Run, load_run
from tests.support.paths import DATA, REPO_ROOT

TDMA = DATA / "tdma.json"
TOY = DATA / "toy-failed.json"


class _Elements(HTMLParser):
    """Start tags with their attributes, and the text, of an HTML document."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parse(document: str) -> _Elements:
    parser = _Elements()
    parser.feed(document)
    parser.close()
    return parser


def images(document: str) -> list[str]:
    return [attrs["alt"] for tag, attrs in parse(document).tags if tag == "img"]


def on_gpu(run: Run) -> Run:
    """The same run as if measured on a GPU box (only the device fields differ)."""
    device = {"platform": "gpu", "device_kind": "NVIDIA H100"}
    environment = {**run.environment, "platform": "gpu", "device_kind": "NVIDIA H100"}
    records = tuple(dataclasses.replace(r, device=device) for r in run.records)
    return Run(environment, run.invocation, records)


def row(text: str, backend: str, after: str) -> list[str]:
    """Cells of the markdown table row of ``backend`` in the first table after ``after``."""
    section = text[text.index(after) :]
    line = next(x for x in section.splitlines() if x.startswith(f"| {backend} "))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_markdown_tables_have_backends_columns_and_speedups():
    run = load_run(TDMA)
    text = markdown.render(build([run]))
    header = row(text.replace("| backend ", "| HEADER ", 1), "HEADER", "## tridiagonal / smoke")
    assert header[:3] == ["HEADER", "strategy", "median"]
    assert "speedup vs sequential-jax" in header and "systems/s" in header
    for size in ("smoke", "default"):
        medians = {
            r.backend: r.stats["median"] for r in run.records if r.size == size and r.status == "ok"
        }
        assert len(medians) == 6  # tests/support/data/make_results.sh: six backends per size
        column = header.index("speedup vs sequential-jax")
        for backend, median in medians.items():
            cells = row(text, backend, f"## tridiagonal / {size} /")
            assert cells[column] == f"{medians['sequential-jax'] / median:.2f}"
    # the counts table: the per-column loop dispatches 202 executables per call
    assert row(text, "sequential-jax", "Where the time goes")[1] == "202"


def test_the_run_time_shares_say_they_are_of_the_cells_summed_times():
    """The run's stages are summed over its cells, which may have run two at a time: the
    note under the table gives that sum and says a share is not one of the wall time."""
    run = load_run(TDMA)
    whole = sum(sum((r.extra.get("phases_s") or {}).values()) for r in run.records)
    assert whole > 0
    text = markdown.render(build([run]))
    section = text.split("## Where the run's time went", 1)[1].split("\n## ", 1)[0]
    expected = f"summed over the cells' own times ({format_duration(whole)} in all)"
    assert expected in section and "not of the run's wall time" in section
    assert expected in "".join(parse(html.render(build([run]))).text)


def test_a_scenario_without_a_sequential_backend_has_no_speedup_column():
    """A user's scenario of one jitted backend: no "speedup vs None" column."""
    run = load_run(TDMA)
    kept = tuple(r for r in run.records if r.strategy != "sequential")
    facts = {k: dataclasses.replace(v, baseline=None) for k, v in run.scenarios.items()}
    invocation = dataclasses.replace(run.invocation, scenarios=facts)
    text = markdown.render(build([Run(run.environment, invocation, kept)]))
    header = row(text.replace("| backend ", "| HEADER ", 1), "HEADER", "## tridiagonal / smoke")
    assert header[:3] == ["HEADER", "strategy", "median"] and "x fastest" in header
    assert not [column for column in header if column.startswith("speedup vs")], header


def test_html_is_self_contained_with_one_image_per_plot():
    document = html.render(build([load_run(TDMA)]))
    elements = parse(document)
    alts = images(document)
    # one time-vs-size and one memory-vs-size plot, and per size a speedup and a
    # decomposition plot
    assert sorted(alts) == sorted(
        [
            "Time vs size: tridiagonal / float64",
            "Memory vs size: tridiagonal / float64",
            *[
                f"{kind}: tridiagonal / {size} / float64 / cpu:cpu"
                for size in ("smoke", "default")
                for kind in ("Speedup over sequential-jax", "Where the time goes")
            ],
        ]
    )
    sources = [attrs["src"] for tag, attrs in elements.tags if tag == "img"]
    assert all(src.startswith("data:image/svg+xml;base64,") for src in sources)
    external = [
        attrs
        for tag, attrs in elements.tags
        if (tag in ("script", "link") or (tag == "img" and not attrs["src"].startswith("data:")))
    ]
    assert external == []  # no network, no external files
    assert sum(tag == "figcaption" for tag, _ in elements.tags) == len(alts)
    # at a glance, per size the timing, counts and memory tables, where the run's time went
    assert sum(tag == "table" for tag, _ in elements.tags) == 1 + 2 * 3 + 1


def test_a_scenario_opens_with_its_times_and_the_glance_says_what_to_change():
    """Issue #70: a reader sees each table's speedup chart, then its timing table, before
    counts and memory; the memory vs size plot closes the scenario; "At a glance" gives
    the slowest backend's lead finding, shortened, so stopping there still answers."""
    run = load_run(TDMA)
    document = html.render(build([run]))
    alts = images(document)
    assert alts[0] == "Time vs size: tridiagonal / float64"
    assert alts[-1] == "Memory vs size: tridiagonal / float64"
    for size in ("smoke", "default"):
        section = document.split(f"<h3>tridiagonal / {size} / float64", 1)[1]
        chart = section.index("Speedup over sequential-jax")
        assert chart < section.index("<table") < section.index("Where the time goes")
    glance = build([run]).glance
    leads = glance["what to change (slowest)"]
    assert all(len(lead) <= report_tables.GLANCE_LEAD for lead in leads)
    for title, lead in zip(glance["table"], leads, strict=True):
        ok = next(t.ok for t in build([run]).tables if t.title == title)
        slowest = ok.loc[ok["median_s"].idxmax()]
        assert lead.startswith(f"{slowest['backend']}: {slowest['findings'][0].cost}: ")
    assert "what to change (slowest)" in markdown.render(build([run])).split("## At a glance")[1]


def test_two_devices_are_shown_side_by_side():
    cpu = load_run(TDMA)
    gpu = on_gpu(cpu)
    text = markdown.render(build([cpu, gpu]))
    for device in ("cpu:cpu", "gpu:NVIDIA H100"):
        assert f"## tridiagonal / default / float64 / {device}" in text
    document = html.render(build([cpu, gpu]))
    alts = images(document)
    for size in ("smoke", "default"):
        assert f"Devices side by side: tridiagonal / {size} / float64" in alts
    assert alts.count("Time vs size: tridiagonal / float64") == 1  # one panel per device
    fastest = min(r.stats["median"] for r in cpu.records if r.size == "default")
    assert f"({format_seconds(fastest)}, on cpu:cpu)" in "".join(parse(document).text)


def test_failed_and_skipped_cells_render_their_error():
    run = load_run(TOY)
    text = markdown.render(build([run]))
    assert "- **wrong** failed: MismatchError: toy output differs" in text
    assert "- **default-only** skipped: skipped at size 'smoke': slow" in text
    page = "".join(parse(html.render(build([run]))).text)
    assert "wrong failed: MismatchError: toy output differs" in page


def test_runs_that_cannot_be_compared_are_shown_apart(tmp_path):
    run = load_run(TDMA)
    other = dataclasses.replace(
        run,
        records=tuple(
            dataclasses.replace(r, size_params={**r.size_params, "batch": 7})
            for r in run.records
            if r.size == "smoke"
        ),
    )
    text = markdown.render(build([run, other]))
    apart = text[text.index("## Not compared") :]
    assert "run 1: tridiagonal / smoke / float64: size parameters" in apart
    assert '"batch": 7' in apart
    assert "(run 1)" not in text  # its records are in no table
    # another schema version is listed apart by the CLI, not fatal
    old = json.loads(TOY.read_text())
    old["schema_version"] = 0
    (tmp_path / "old.json").write_text(json.dumps(old))
    out = tmp_path / "report.md"
    assert main(["report", str(TDMA), str(tmp_path / "old.json"), "--md", str(out)]) == 0
    assert "schema version 0, this scanbench reads version 1" in out.read_text()


def test_other_jax_version_on_the_same_device_is_apart_unless_asked():
    run = load_run(TDMA)
    versions = {**run.environment["versions"], "jax": "9.9.9"}
    newer = dataclasses.replace(run, environment={**run.environment, "versions": versions})
    assert "jax version 9.9.9 differ" in markdown.render(build([run, newer]))
    mixed = markdown.render(build([run, newer], mixed_versions=True))
    assert "Not compared" not in mixed and "sequential-jax (run 1)" in mixed


def test_cli_report_writes_both_files(tmp_path, capsys):
    md, page = tmp_path / "r.md", tmp_path / "r.html"
    assert main(["report", str(TDMA), str(TOY), "--md", str(md), "--html", str(page)]) == 0
    assert "## toy / smoke / float64 / cpu:cpu" in md.read_text()
    # one size: one bar per backend (its speedup), no size axis
    assert "Speedup over good: toy / smoke / float64 / cpu:cpu" in images(page.read_text())
    assert f"report: {page}" in capsys.readouterr().err


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (Debian: apt-get install chromium)"
)
def test_chromium_renders_the_report(tmp_path):
    from PIL import Image

    page = tmp_path / "report.html"
    page.write_text(html.render(build([load_run(TDMA), on_gpu(load_run(TDMA))])))
    shot = tmp_path / "shot.png"
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--screenshot={shot}",
        "--window-size=1280,2400",
    ]
    subprocess.run([CHROMIUM, *flags, page.as_uri()], check=True, timeout=120, capture_output=True)
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 2400)
    # the first plot (time vs size) sits in the top part: many colours, not a blank page
    colours = image.crop((0, 0, 1280, 1600)).getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 50


def test_scaling_section_over_device_counts():
    run = load_run(DATA / "scaling.json")
    text = markdown.render(build([run]))
    section = text[text.index("## Scaling: tridiagonal / smoke / float64 / cpu:cpu (run 0)") :]
    medians = {
        (r.backend, r.device["cell_devices"]): r.stats["median"]
        for r in run.records
        if r.status == "ok"
    }
    assert {devices for _, devices in medians} == {1, 2, 4}
    table = {
        cells[1]: cells
        for line in section.splitlines()
        if line.startswith("| sharded ")
        for cells in [[cell.strip() for cell in line.strip("|").split("|")]]
    }
    assert table["1"][5:] == ["1.00", "100%"]
    for devices in (2, 4):
        speedup = medians[("sharded", 1)] / medians[("sharded", devices)]
        assert table[str(devices)][5:] == [f"{speedup:.2f}", f"{speedup / devices:.0%}"]
    for devices in (1, 2, 4):  # each device count is its own table, labelled
        label = "cpu:cpu" if devices == 1 else f"cpu:cpu x{devices}"
        assert f"## tridiagonal / smoke / float64 / {label}" in text
    assert "Scaling over devices: tridiagonal / smoke / float64 / cpu:cpu (run 0)" in images(
        html.render(build([run]))
    )


def test_a_markdown_report_alone_does_not_import_the_plots(tmp_path):
    """matplotlib is the HTML report's (its plots): a run asking for markdown only, as
    most of the manual's do, does not pay its import."""
    import sys

    results = REPO_ROOT / "docs" / "results" / "smoke.json"
    script = (
        "import sys\n"
        "from scanbench.reports.written import write_reports\n"
        "from scanbench.results import load_run\n"
        f"markdown = write_reports([load_run({str(results)!r})], md={str(tmp_path / 'r.md')!r})\n"
        "assert '## Where the run' in markdown\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_report_says_when_its_results_were_recorded_by_other_code():
    """Issue 66 D8: the committed results were recorded hundreds of commits before the
    rules rendering their sentences; the report says so, by commit or by version."""
    from scanbench.reports.tables import code_differs

    env = {"scanbench_commit": "a3af7f26df9b817d1a25", "versions": {"scanbench": "0.2.0"}}
    said = code_differs(env, ("7aada19e45c2d267b795", "0.2.0"))
    assert said is not None and "recorded at commit a3af7f26df9b" in said
    assert "rendered by commit 7aada19e45c2" in said
    assert code_differs(env, ("a3af7f26df9b817d1a25", "0.2.0")) is None
    wheel = {"scanbench_commit": None, "versions": {"scanbench": "0.1.0"}}
    assert "recorded by scanbench 0.1.0" in code_differs(wheel, (None, "0.2.0"))
    assert code_differs({"versions": {"scanbench": "0.2.0"}}, (None, "0.2.0")) is None

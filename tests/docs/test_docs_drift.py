"""The manual cannot drift from the code.

Generated blocks (results figures, ``--help`` texts, tables drawn from the code) must be
what ``python docs/figures.py`` draws now; the tables still written by hand (the results
format, the gate's settings and keys, the exit codes of the gate page) must name exactly
what the code has; every module, path and page a page names must exist, and every page
must be reachable.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import re
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS))

import blocks  # noqa: E402  (docs/, on the path above)
import figures  # noqa: E402
import tables  # noqa: E402

import scanbench  # noqa: E402

SMOKE = DOCS / "results" / "smoke.json"
CODE = re.compile(r"`([^`\n]+)`")


def _prose(text: str) -> str:
    """A page without its fenced code and HTML comments."""
    text = blocks.FENCE.sub("", text)
    return re.sub(r"<!--.*?-->", "", text, flags=re.S)


def _section(page: Path, heading: str) -> str:
    """The text under the first heading whose title is ``heading``, to the next heading
    of the same or a higher level."""
    text = blocks.FENCE.sub("", page.read_text(encoding="utf-8"))
    match = re.search(rf"^(#+) +{re.escape(heading)} *$", text, re.M)
    assert match, f"{page.name}: no heading {heading!r}"
    level = len(match[1])
    end = re.compile(rf"^#{{1,{level}}} ", re.M).search(text, match.end())
    return text[match.end() : end.start() if end else len(text)]


def _rows(section: str) -> list[list[str]]:
    """The cells of the first Markdown table of ``section`` (header and rule left out)."""
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        table.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return table


def _names(cell: str) -> set[str]:
    return set(CODE.findall(cell))


def _first_column(page: Path, heading: str) -> set[str]:
    return set().union(*(_names(row[0]) for row in _rows(_section(page, heading))))


def _same(documented: set[str], code: set[str], where: str) -> None:
    """The names a page's table gives are exactly the code's, else a message saying which."""
    lacks, extra = sorted(code - documented), sorted(documented - code)
    assert not lacks and not extra, (
        f"{where}: the page lacks {lacks} and names {extra}, which the code does not have"
    )


# ---------------------------------------------------------------- generated blocks


@pytest.mark.slow
def test_every_generated_block_is_what_the_code_and_the_committed_results_give():
    """`python docs/figures.py --check`: tables, figures, SVG plots and help texts."""
    stale = blocks.stale(figures.renderer(write=False))
    where = {
        str(page.relative_to(ROOT)): blocks.first_difference(page.read_text(), fresh)
        for page, fresh in stale.items()
    }
    assert not where, f"run `python docs/figures.py` and commit the pages: {where}"


def _page(tmp_path: Path, text: str) -> tuple[Path, str]:
    page = tmp_path / "page.md"
    page.write_text(text, encoding="utf-8")
    return page, text


def test_a_planted_stale_table_fails_naming_its_line(tmp_path):
    """A count-keys table that lost a row (as the results page once lost `waits`)."""
    fresh = tables.render("count-keys", DOCS / "results-format.md")
    planted = "\n".join(line for line in fresh.splitlines() if "`waits`" not in line)
    text = f"# A page\n\n<!-- table: count-keys -->\n\n{planted}\n\n<!-- end table -->\n"
    page, text = _page(tmp_path, text)
    redrawn = blocks.regenerate(page, text, figures.renderer(write=False))
    assert redrawn != text and "`waits`" in redrawn
    assert blocks.stale(figures.renderer(write=False), [page]) == {page: redrawn}
    assert "`waits`" in blocks.first_difference(text, redrawn)


def test_a_new_marker_is_filled_in_and_a_marker_in_code_is_text(tmp_path):
    text = "# A page\n\n<!-- table: folders -->\n\nprose\n\n```text\n<!-- table: folders -->\n```\n"
    page, text = _page(tmp_path, text)
    redrawn = blocks.regenerate(page, text, figures.renderer(write=False))
    assert redrawn.count("<!-- end table -->") == 1
    assert "| `harness/` | `scanbench` |" in redrawn
    assert redrawn.endswith("```text\n<!-- table: folders -->\n```\n")
    assert blocks.regenerate(page, redrawn, figures.renderer(write=False)) == redrawn


def test_a_marker_that_names_nothing_fails(tmp_path):
    page, text = _page(tmp_path, "<!-- table: no-such-table -->\n")
    with pytest.raises(ValueError, match="no table 'no-such-table'"):  # names the choices
        blocks.regenerate(page, text, figures.renderer(write=False))


# ---------------------------------------------------------------- the API reference


def test_the_api_reference_gives_every_public_name_once():
    """Each name of `scanbench.__all__` has its generated entry (signature and docstring),
    as Markdown that GitHub shows, and no mkdocstrings directive is left to show twice."""
    text = (DOCS / "reference" / "api.md").read_text(encoding="utf-8")
    entries = re.findall(r"^### `scanbench\.(\w+)`$", text, re.M)
    assert sorted(entries) == sorted(scanbench.__all__), "add the name to a `table: api` block"
    assert not re.search(r"^:::", text, re.M)


def test_an_api_entry_turns_a_google_docstring_into_markdown(tmp_path):
    """Args become a list, the example a pycon block, a long signature one parameter a
    line; a public value with no description fails the generation, naming the fix."""
    import api_reference

    def factory(name: str, *, sizes: frozenset[str] | None = None, **more: int) -> str:
        """Build one.

        Args:
            name: the CLI name,
                on two lines.
            sizes: where it runs.

        Example:
            >>> factory("x")
            'x'
        """
        return name

    drawn = api_reference.entry("factory", factory)
    assert "factory(name: str, *, sizes: frozenset[str] | None = None, **more: int) -> str" in drawn
    assert "- `name`: the CLI name, on two lines.\n- `sizes`: where it runs." in drawn
    assert "```pycon\n>>> factory(\"x\")\n'x'\n```" in drawn
    long = api_reference.signature("f" * 90, factory)
    assert long.startswith("f" * 90 + "(\n    name: str,\n    *,\n")
    with pytest.raises(KeyError, match="CONSTANTS"):
        api_reference.entry("LIMIT", 3)


# ---------------------------------------------------------------- exit codes


def test_exit_codes_are_read_from_the_handlers():
    codes = tables.exit_codes_by_command()
    assert set(codes) == set(tables._subcommands())
    assert all(2 in found for found in codes.values())
    assert codes["run"] == {0, 1, 2, 70, 130, 143}  # the runner saves what finished
    assert 3 in next(found for name, found in codes.items() if name == "bisect")
    # `gather` returns what `run`'s `finish` returns: a returned call is followed
    assert codes["gather"] == {0, 1, 2, 70, 130, 143}


def test_the_gate_page_exit_table_names_the_codes_of_its_commands():
    """The gate page's own table (`scanbench gate`, the environment A/B) says the codes the
    handlers return, no more and no fewer."""
    codes = tables.exit_codes_by_command()
    text = blocks.FENCE.sub("", (DOCS / "gate.md").read_text(encoding="utf-8"))
    for header in re.finditer(r"^\| exit \|(?P<columns>.*)\|$", text, re.M):
        columns = [
            re.sub(r"`scanbench (\S+)`", r"\1", column.strip())
            for column in header["columns"].split("|")
        ]
        rows = _rows(text[header.start() :])
        documented = {int(row[0]) for row in rows if row[0].isdigit()}
        for column in columns:
            assert documented == codes[column] - {130, 143}, (column, documented, codes[column])


# ---------------------------------------------------------------- the results format


def _committed() -> dict:
    return json.loads(SMOKE.read_text(encoding="utf-8"))


def test_the_records_table_names_every_field_of_a_record():
    documented = _first_column(DOCS / "results-format.md", "`records`")
    fields = {field.name for field in dataclasses.fields(scanbench.Record)}
    _same(documented, fields, "docs/results-format.md, `records` (scanbench.Record)")


def test_the_record_stats_and_timing_settings_are_named_in_full():
    page = DOCS / "results-format.md"
    stats = next(row for row in _rows(_section(page, "`records`")) if row[0] == "`stats`")
    stored = set(_committed()["records"][0]["stats"])
    _same(_names(stats[1]), stored, "docs/results-format.md, `stats` (a stored record)")
    timing = next(row for row in _rows(_section(page, "`invocation`")) if row[0] == "`timing`")
    fields = {field.name for field in dataclasses.fields(scanbench.TimingConfig)}
    _same(_names(timing[1]), fields, "docs/results-format.md, `timing` (scanbench.TimingConfig)")


def test_the_environment_and_invocation_tables_name_every_key_a_run_stores():
    page = DOCS / "results-format.md"
    run = _committed()
    _same(_first_column(page, "`environment`"), set(run["environment"]), "`environment`")
    documented = _first_column(page, "`invocation`")
    # written only by a run with --grow, a resume forced over a changed environment, the
    # notebook API, a shard and a gathered run
    occasional = {"growth", "resumed_with_differences", "api", "isolation", "tolerance"}
    occasional |= {"shard", "gathered"}
    _same(documented - occasional, set(run["invocation"]), "`invocation`")


def test_the_counts_table_names_every_section_a_record_may_hold():
    counts = importlib.import_module(scanbench.Counts.__module__)
    documented = _first_column(DOCS / "results-format.md", "`counts`")
    _same(documented, set(counts.SECTIONS), "docs/results-format.md, `counts` (SECTIONS)")


# ---------------------------------------------------------------- the gate file


def test_the_settings_table_names_every_setting_with_its_default():
    from scanbench.gate.rules import Settings

    rows = _rows(_section(DOCS / "gate.md", "`[settings]`"))
    documented = {next(iter(_names(row[0]))): row[1].strip("`") for row in rows}
    fields = {field.name: field.default for field in dataclasses.fields(Settings)}
    _same(set(documented), set(fields), "docs/gate.md, `[settings]`")
    for key, default in fields.items():
        shown = tomllib.loads(f"value = {documented[key]}")["value"]
        expected = list(default) if isinstance(default, tuple) else default
        assert shown == expected, f"[settings] {key}: the page says {shown!r}, the code {default!r}"


@pytest.mark.parametrize("table", ["invariant", "baseline"])
def test_the_rule_tables_name_every_key_the_gate_file_accepts(table, tmp_path):
    from scanbench.gate.rules import load_gates

    gate = tmp_path / "gates.toml"
    gate.write_text(f'[[{table}]]\nno_such_key = 1\nscenario = "x"\n', encoding="utf-8")
    with pytest.raises(scanbench.UnknownNameError) as refused:
        load_gates(gate)
    documented = _first_column(DOCS / "gate.md", f"`[[{table}]]`")
    _same(documented, set(refused.value.choices), f"docs/gate.md, `[[{table}]]`")


# ---------------------------------------------------------------- names, paths, pages


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attribute in parts[cut:]:
                value = getattr(value, attribute)
        except AttributeError:
            return False
        return True
    return False


PAGES = sorted([ROOT / "README.md", *DOCS.rglob("*.md")])


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_scanbench_name_a_page_gives_exists(page):
    """`scanbench.x.y` in prose: a module, or a name of one (renames must follow)."""
    names = set()
    for span in CODE.findall(_prose(page.read_text(encoding="utf-8"))):
        match = re.match(r"scanbench(?:\.[A-Za-z_]\w*)+", span)
        if match:
            names.add(match[0])
    missing = sorted(name for name in names if not _resolves(name))
    assert not missing, f"{page.relative_to(ROOT)} names what does not exist: {missing}"


def _top_folders() -> set[str]:
    return {path.relative_to(ROOT).parts[0] for path in tables._tracked() if path.parent != ROOT}


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_repository_path_a_page_gives_exists(page):
    tops = _top_folders() - {"results"}
    missing = []
    for span in CODE.findall(_prose(page.read_text(encoding="utf-8"))):
        path = span.split(":")[0].split(" ")[0]
        ours = "/" in path and path.split("/")[0] in tops
        if ours and not re.search(r"[<>*…]|\.\.\.", path) and not (ROOT / path).exists():
            missing.append(path)
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_every_page_is_in_the_navigation_and_linked_from_the_overview_and_the_readme():
    nav = tables._nav_pages()
    listed = nav[: len(nav) - len(set(DOCS.rglob("*.md")) - set(nav))]
    assert set(listed) == set(DOCS.rglob("*.md")), "add every page to mkdocs.yml's nav"
    for front in (DOCS / "index.md", ROOT / "README.md"):
        text = front.read_text(encoding="utf-8")
        for page in listed:
            if page == front:
                continue
            link = tables._relative(page, front)
            assert f"]({link})" in text or f"]({link}#" in text, f"{front.name}: link {link}"


def test_the_overview_names_every_command():
    text = (DOCS / "index.md").read_text(encoding="utf-8")
    missing = [name for name in tables._subcommands() if f"`{name}`" not in text]
    assert not missing, f"docs/index.md does not name the commands {missing}"


# ---------------------------------------------------------------- the glossary

GLOSSARY = DOCS / "glossary.md"
# the terms a new reader trips over, as the pages print them: the first page (in reading
# order: the README, then the site's navigation) that shows one must link its entry
FIRST_USE = {
    "cell": r"\bcells?\b",
    "backend": r"\bbackends?\b",
    "strategy": r"\bstrateg(?:y|ies)\b",
    "gpu-launch-equivalent": r"GPU launch equiv",
    "x-bw-bound": r"x BW bound",
    "level": r"\((?:L2|L3|DRAM)[,)]",
    "xla": r"\+xla\b",
    "devices": r"\(\d+ devices\)",
    "disturbed": r"\bdisturbed\b",
    "served-worker": r"\bserved workers?\b",
    "x-fastest": r"\bx fastest\b",
    "x-roofline": r"\bx roofline\b",
    "memory-x-min": r"memory \(x min\)",
    "scaled": r"≈",
    "unchecked": r"\bunchecked\b",
    "quiet-stage": r"\bquiet stages?\b",
    "labelled-estimate": r"\blabelled estimates?\b",
    "host-conversions": r"\bhost conversions?\b",
    "invariant": r"\binvariants?\b",
    "interleaved-blocks": r"\binterleaved\b",
    "crossover": r"\bcrossovers?\b",
    "change-point": r"\bchange points?\b",
}


def _reading_order() -> list[Path]:
    return [ROOT / "README.md", *(p for p in tables._nav_pages() if p != GLOSSARY)]


def _seen(text: str) -> str:
    """What a reader of the page sees as words: prose and generated tables, without code."""
    text = _prose_keeping_blocks(text)
    return re.sub(r"`[^`\n]*`", "", text)


def _prose_keeping_blocks(text: str) -> str:
    text = blocks.FENCE.sub("", text)
    return re.sub(r"<!--.*?-->", "", text, flags=re.S)


def test_every_glossary_entry_has_an_anchor_and_the_terms_checked_exist():
    text = GLOSSARY.read_text(encoding="utf-8")
    anchors = re.findall(r'<a id="([^"]+)"></a>', text)
    assert len(anchors) == len(set(anchors)), "an anchor of the glossary is repeated"
    assert set(FIRST_USE) <= set(anchors)


@pytest.mark.parametrize("anchor", sorted(FIRST_USE))
def test_a_glossary_term_is_linked_where_a_reader_first_meets_it(anchor):
    pattern = re.compile(FIRST_USE[anchor])
    for page in _reading_order():
        text = page.read_text(encoding="utf-8")
        if pattern.search(_seen(text)):
            link = f"{tables._relative(GLOSSARY, page)}#{anchor}"
            assert f"]({link})" in text, f"{page.relative_to(ROOT)} first shows it: link {link}"
            return
    pytest.fail(f"no page shows the term of glossary.md#{anchor}")


def test_the_glossary_names_every_column_and_mark_the_reports_print():
    from scanbench.reports import frame
    from scanbench.reports import tables as report_tables

    terms = {
        re.sub(r"\s+", " ", term)
        for term in re.findall(r"\*\*([^*]+)\*\*", GLOSSARY.read_text(encoding="utf-8"))
    }
    printed = set()
    for results in sorted((DOCS / "results").glob("*.json")):
        report = figures.report(results)
        printed |= set(report.glance.columns)
        for table in report.tables:
            for shown in (table.timing, table.counts, table.memory):
                printed |= set(shown.columns) if shown is not None else set()
    printed = {
        "speedup vs B" if name.startswith("speedup vs ") and "baseline" not in name else name
        for name in printed
    }
    printed = {name for name in printed if not name.endswith("/s") or name == "GB/s"}
    printed -= {"backend", "strategy", "table", "note"}  # the table's own words
    marks = {frame.XLA_MARK, report_tables.DISTURBED_MARK, report_tables.UNCHECKED_MARK}
    printed |= {mark.strip() for mark in marks}
    missing = sorted(printed - terms - {"speedup vs sequential baseline"})
    assert not missing, f"docs/glossary.md has no entry for {missing}"


# ---------------------------------------------------------------- claims about the figures


def _rows_of(results: Path, scenario: str, size: str):
    table = figures._table(results, scenario, size)
    return table.ok.set_index("backend")


def test_what_the_pages_say_of_the_two_python_loops_holds_in_the_committed_runs():
    """docs/scenarios.md explains the smoke table's two Python loops in words;
    the words must stay true of the committed results they sit beside."""
    smoke = _rows_of(SMOKE, "tridiagonal", "smoke")
    queued, synced = smoke.loc["sequential-jax"], smoke.loc["sequential-jax-sync"]
    assert synced["median_s"] > queued["median_s"]  # "slower ... in the smoke table"
    assert synced["dispatches"] == queued["dispatches"]  # "the same dispatches"
    assert synced["sync_pct"] > 0 and not queued["sync_pct"]  # "the sync share"
    scanned = smoke[smoke["strategy"] == "scanned"]
    assert (scanned["dispatches"] == 1).all()  # "each scanned backend makes one per call"
    assert queued["dispatches"] > 100  # "one dispatch per column step"
    default = _rows_of(DOCS / "results" / "default.json", "tridiagonal", "default")
    assert (  # "and at default"
        default.loc["sequential-jax", "median_s"] < default.loc["sequential-jax-sync", "median_s"]
    )


# ---------------------------------------------------------------- column and option tables


def test_the_compare_columns_table_names_every_column_compare_returns():
    from scanbench.notebook import COLUMNS

    text = (DOCS / "python-api.md").read_text(encoding="utf-8")
    table = text.split("### Columns", 1)[1].split("###", 1)[0]
    named = set(re.findall(r"`(\w+)`", table))
    assert set(COLUMNS) <= named, sorted(set(COLUMNS) - named)


def test_the_history_report_option_table_names_every_option_of_the_command():
    from scanbench.cli.main import build_parser

    parser = build_parser()
    command = next(
        action.choices["history"]
        for action in parser._actions
        if getattr(action, "choices", None) and "history" in action.choices
    )
    report = next(
        action.choices["report"]
        for action in command._actions
        if getattr(action, "choices", None) and "report" in action.choices
    )
    options = {
        option
        for action in report._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }
    text = (DOCS / "history.md").read_text(encoding="utf-8")
    table = text.split("| `scanbench history report` | meaning |", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"`(--[\w-]+)", table))
    assert options <= named, sorted(options - named)

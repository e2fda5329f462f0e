"""Sentences a reader takes in one pass: no sentence of a guide page runs past `MAX_WORDS`.

The guide pages are those a user reads to learn and to decide (the README, the overview,
getting started, the how-to and explanation pages). The reference pages (the command
line, the results format, the API reference) and the dated performance log are exempt:
their rows and entries are looked up, not read through. Prose only: code, tables,
headings, HTML comments and generated blocks are left out; a code span or a link counts
as the words it shows.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
DOCS = ROOT / "docs"
MAX_WORDS = 40
REFERENCE = {"cli.md", "results-format.md", "performance-log.md", "reference/api.md"}
GUIDES = [
    ROOT / "README.md",
    *sorted(page for page in DOCS.rglob("*.md") if str(page.relative_to(DOCS)) not in REFERENCE),
]
FENCE = re.compile(r"^(?P<indent> *)```.*?^(?P=indent)```[ \t]*$", re.M | re.S)
GENERATED = re.compile(r"<!--\s*(figure|scanbench-help|table):.*?<!-- end \1 -->", re.S)
# a sentence ends at . ! or ? (and any closing markup) followed by a space, except after the
# usual abbreviations (a name such as `scanbench` may start the next one in lower case)
ABBREVIATIONS = r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bvs\.)(?<!\betc\.)(?<!\bcf\.)"  # with their period
END = re.compile(ABBREVIATIONS + r"(?<=[.!?])[)*_\"']*\s+(?=\S)")


def _blank(match: re.Match) -> str:
    return "\n" * match.group(0).count("\n")


def paragraphs(text: str) -> list[tuple[int, str]]:
    """(first line, text) of each paragraph or list item of prose."""
    text = GENERATED.sub(_blank, text)
    text = FENCE.sub(_blank, text)
    text = re.sub(r"<!--.*?-->", _blank, text, flags=re.S)
    found, current, start = [], [], 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        item = re.match(r"^(?:[-*+]|\d+\.)\s+", stripped)
        if not stripped or stripped.startswith(("#", "|", "<")) or item:
            if current:
                found.append((start, " ".join(current)))
            current = []
            if item:
                current, start = [stripped[item.end() :]], number
            continue
        if not current:
            start = number
        current.append(stripped)
    if current:
        found.append((start, " ".join(current)))
    return found


def words(sentence: str) -> int:
    sentence = re.sub(r"`[^`]*`", "CODE", sentence)  # a code span is one word
    sentence = re.sub(r"\]\([^)]*\)", "]", sentence)  # a link shows its text only
    return len(re.findall(r"[\w\d][\w\d'’.,/-]*", sentence))


def long_sentences(page: Path, root: Path = ROOT) -> list[str]:
    """Each sentence of ``page`` over `MAX_WORDS`: where it is, its length, the sentence."""
    found = []
    for line, paragraph in paragraphs(page.read_text(encoding="utf-8")):
        masked = re.sub(r"`[^`]*`", lambda m: "x" * len(m.group(0)), paragraph)
        cuts = [0, *(m.end() for m in END.finditer(masked)), len(paragraph)]
        for begin, end in itertools.pairwise(cuts):
            sentence = paragraph[begin:end].strip()
            if words(sentence) > MAX_WORDS:
                where = f"{page.relative_to(root)}:{line}"
                found.append(f"{where}: {words(sentence)} words: {sentence}")
    return found


@pytest.mark.parametrize("page", GUIDES, ids=[str(p.relative_to(ROOT)) for p in GUIDES])
def test_no_guide_sentence_runs_past_the_limit(page):
    found = long_sentences(page)
    assert not found, f"split these sentences (at most {MAX_WORDS} words):\n" + "\n".join(found)


def test_the_checker_splits_sentences_and_finds_a_long_one(tmp_path):
    """Abbreviations and code spans do not end a sentence; code, tables and headings are
    not prose; a list item is a sentence of its own."""
    page = tmp_path / "page.md"
    long = " ".join(["word"] * (MAX_WORDS + 1)) + "."
    half = " ".join(["word"] * (MAX_WORDS // 2))
    page.write_text(
        f"# Title\n\nShort one, e.g. this. Another `a. B` one.\n\n- {long}\n\n"
        f"```text\n{long}\n```\n\n| {long} |\n\n{half}, e.g. {half}, i.e. {half} vs. it.\n",
        encoding="utf-8",
    )
    found = long_sentences(page, tmp_path)
    assert [line.split(": ")[:2] for line in found] == [
        ["page.md:5", f"{MAX_WORDS + 1} words"],
        ["page.md:13", f"{3 * (MAX_WORDS // 2) + 4} words"],  # one sentence, abbreviations in
    ]

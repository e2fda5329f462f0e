"""Generated blocks of the Markdown sources: found between markers, redrawn by one command.

A page holds what is generated from the program and its committed results as plain
Markdown, so that GitHub shows it as the built site does. A generated block is an HTML
comment that names it, the generated Markdown, and an end comment:

- ``figure: NAME RESULTS.json [KEY=VALUE ...]``: a table or plot of a results file
  (`figures.render`), with the machine and date the file records;
- ``scanbench-help: COMMAND``: the real ``scanbench COMMAND --help`` (empty: the top level);
- ``table: NAME [KEY=VALUE ...]``: a table drawn from the code's own constants
  (`tables.render`: commands, exit codes, count keys, factories, the layout).

Each opening comment is closed by ``end figure``, ``end scanbench-help`` or ``end table``
(as a comment). An opening comment without its closing one is filled in on the next run,
so a new marker needs nothing else. ``python docs/figures.py`` rewrites every page;
``python docs/figures.py --check`` (and the tests) fail when a committed block differs
from what the code and the committed results give now. Markers inside fenced code blocks
are text, not markers.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
KINDS = ("figure", "scanbench-help", "table")
_KIND = "|".join(re.escape(kind) for kind in KINDS)
OPEN = re.compile(rf"<!--\s*(?P<kind>{_KIND}):\s*(?P<args>[^>]*?)\s*-->")
FENCE = re.compile(r"^(?P<indent> *)```[^\n`]*\n.*?^(?P=indent)```[ \t]*$", re.M | re.S)


def end_marker(kind: str) -> str:
    return f"<!-- end {kind} -->"


@dataclasses.dataclass(frozen=True)
class Block:
    """One marker of a page: what it names, where it stands, and its current content."""

    page: Path
    kind: str
    args: str
    start: int  # the opening comment
    body_start: int  # just after it
    end: int  # just after the closing comment (== body_start when there is none yet)
    line: int

    @property
    def where(self) -> str:
        page = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{page}:{self.line}"


def pages() -> list[Path]:
    """Every Markdown source that may hold generated blocks: the README and the manual."""
    return sorted([ROOT / "README.md", *DOCS.rglob("*.md")])


def _fenced(text: str) -> list[tuple[int, int]]:
    return [match.span() for match in FENCE.finditer(text)]


def blocks(page: Path, text: str) -> Iterator[Block]:
    """The markers of ``text`` (the page at ``page``), outside fenced code, in order."""
    fences = _fenced(text)
    for match in OPEN.finditer(text):
        if any(start <= match.start() < end for start, end in fences):
            continue
        kind = match["kind"]
        rest = text[match.end() :]
        closing = rest.find(end_marker(kind))
        following = OPEN.search(rest)
        has_end = closing >= 0 and (following is None or following.start() > closing)
        end = match.end() + closing + len(end_marker(kind)) if has_end else match.end()
        yield Block(
            page,
            kind,
            match["args"].strip(),
            match.start(),
            match.end(),
            end,
            text.count("\n", 0, match.start()) + 1,
        )


Renderer = Callable[[Block], str]


def regenerate(page: Path, text: str, render: Renderer) -> str:
    """``text`` with every block's content redrawn by ``render`` (Markdown, no markers)."""
    out, position = [], 0
    for block in blocks(page, text):
        opening = text[block.start : block.body_start]
        content = render(block).strip("\n")
        out += [text[position : block.start], opening, f"\n\n{content}\n\n", end_marker(block.kind)]
        position = block.end
    out.append(text[position:])
    return "".join(out)


def stale(render: Renderer, only: list[Path] | None = None) -> dict[Path, str]:
    """The pages whose committed blocks differ from what ``render`` draws now, each with
    the page as it should read."""
    found = {}
    for page in only or pages():
        text = page.read_text(encoding="utf-8")
        fresh = regenerate(page, text, render)
        if fresh != text:
            found[page] = fresh
    return found


def first_difference(old: str, new: str) -> str:
    """The first line where two versions of a page differ (for error messages)."""
    for number, (a, b) in enumerate(zip(old.splitlines(), new.splitlines(), strict=False), 1):
        if a != b:
            return f"line {number}: committed {a[:90]!r}, generated {b[:90]!r}"
    return "the pages differ in length"

"""Every example of README.md and docs/ runs, every relative link resolves, every generated
figure matches its results file.

The rules an example follows (the manual's contributing page says the same):

- a fenced ``python`` block runs, in one namespace per page, in order; a ``bash`` (or
  ``sh``, ``shell``, ``console``) block runs with ``bash -e``; each page runs in a fresh
  temporary directory, with this environment's ``scanbench`` on the ``PATH``;
- ``<!-- file: PATH -->`` on the line before a block writes the block to PATH in that
  directory instead of running it (a scenario file, a gate file);
- ``<!-- notest: REASON -->`` on the line before a block leaves it out, for the reason
  given (it needs a GPU, two hosts, or runs for minutes); a block without a reason fails.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
RUNNABLE = {"python": "python", "bash": "bash", "sh": "bash", "shell": "bash", "console": "bash"}
FENCE = re.compile(
    r"^(?P<indent> *)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```\s*$", re.M | re.S
)
DIRECTIVE = re.compile(r"<!--\s*(?P<kind>notest|file):\s*(?P<value>.*?)\s*-->\s*$")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")


@dataclasses.dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    body: str
    directive: tuple[str, str] | None  # ("notest", reason) or ("file", path)

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        language = (match["info"].strip().split() or [""])[0].strip("{}.")
        line = text.count("\n", 0, match.start()) + 1
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        directive = DIRECTIVE.search(before)
        body = re.sub(rf"^{match['indent']}", "", match["body"], flags=re.M)
        found.append(
            Block(
                page,
                line,
                language,
                body,
                (directive["kind"], directive["value"]) if directive else None,
            )
        )
    return found


def _environment() -> dict[str, str]:
    """This interpreter's bin folder first (its ``scanbench``), no pytest variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SCANBENCH_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def run_page(page: Path, where: Path) -> None:
    """Run a page's examples in order in ``where`` (see the module doc)."""
    namespace: dict = {"__name__": "__docs__"}
    previous = Path.cwd()
    os.chdir(where)
    try:
        for block in blocks(page):
            kind, value = block.directive or ("", "")
            if kind == "notest":
                assert value, f"{block.where}: say why the block is not run (notest: REASON)"
                continue
            if kind == "file":
                target = where / value
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(block.body, encoding="utf-8")
                continue
            if block.language not in RUNNABLE:
                continue
            if RUNNABLE[block.language] == "python":
                exec(compile(block.body, block.where, "exec"), namespace)
                continue
            done = subprocess.run(
                ["bash", "-e", "-o", "pipefail", "-c", block.body],
                cwd=where,
                env=_environment(),
                capture_output=True,
                text=True,
                timeout=900,
            )
            tail = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            assert done.returncode == 0, f"{block.where}: exit {done.returncode}\n{tail}"
    finally:
        os.chdir(previous)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_example_of_the_page_runs(page, tmp_path):
    run_page(page, tmp_path)


def test_every_skipped_example_says_why_and_every_example_is_fenced_with_its_language():
    for page in PAGES:
        for block in blocks(page):
            if block.directive and block.directive[0] == "notest":
                assert block.directive[1], f"{block.where}: notest needs a reason"
            assert block.language, (
                f"{block.where}: give the block's language (```python, ```bash, ```text)"
            )


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_resolves(page):
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    for match in LINK.finditer(text):
        target = match["target"]
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        assert path.exists(), f"{page.relative_to(ROOT)}: broken link {target}"


def test_the_readme_is_a_short_front_door_whose_figure_is_generated():
    """At most 200 lines and 800 words; dates and machine notes only inside the blocks
    generated from a results file (`python docs/figures.py` writes them;
    tests/docs/test_docs_drift.py checks that they are current)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    assert "<!-- figure: compare docs/results/compare/readme.json" in text
    assert len(re.sub(r"<!--.*?-->", "", text, flags=re.S).split()) <= 800
    outside = re.sub(r"<!-- figure:.*?<!-- end figure -->", "", text, flags=re.S)
    assert not re.search(r"\b20\d\d-\d\d-\d\d|this VM|this machine", outside), (
        "dates and machine notes belong in docs/performance-log.md"
    )

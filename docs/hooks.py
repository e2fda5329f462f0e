"""MkDocs hooks: what the manual shows from the program itself, generated at build time.

- ``<!-- scanbench-help: COMMAND -->`` becomes the real ``scanbench COMMAND --help``
  (``<!-- scanbench-help: -->``: the top-level help), so the command-line page cannot
  drift from the parser;
- ``<!-- figure: NAME RESULTS.json [KEY=VALUE ...] -->`` becomes the figure NAME of
  `figures` drawn from that results file (with the machine and date it records).

Both fail the build (``mkdocs build --strict``) when they name something that does not
exist.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import figures

HELP = re.compile(r"<!--\s*scanbench-help:\s*(?P<command>[\w-]*)\s*-->")
FIGURE = re.compile(r"<!--\s*figure:\s*(?P<args>[^>]*?)\s*-->")
ROOT = Path(__file__).resolve().parent.parent


def _help(match: re.Match) -> str:
    return f"```text\n{figures.command_help(match['command'])}\n```"


def _figure(match: re.Match) -> str:
    name, path, *options = match["args"].split()
    return figures.render(name, ROOT / path, dict(option.split("=", 1) for option in options))


def on_page_markdown(markdown: str, page, config, files) -> str:
    markdown = HELP.sub(_help, markdown)
    return FIGURE.sub(_figure, markdown)

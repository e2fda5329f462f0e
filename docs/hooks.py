"""MkDocs hook: every generated block of a page is checked against the program and the
committed results while the manual is built.

The blocks are written into the Markdown sources by ``python docs/figures.py`` (see
`blocks`), so GitHub shows them as the site does. Here each page is drawn again; a page
whose committed blocks differ is logged as a warning, which fails ``mkdocs build
--strict`` (the published site never shows a stale block), and is shown as drawn now, so
that ``mkdocs serve`` shows what the next commit will hold. A marker that names nothing
fails the build too.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import blocks
import figures

log = logging.getLogger("mkdocs.plugins.scanbench")


def on_page_markdown(markdown: str, page, config, files) -> str:
    path = Path(page.file.abs_src_path)
    try:
        fresh = blocks.regenerate(path, markdown, figures.renderer(write=False))
    except figures.StaleImage as error:
        log.warning("%s: %s", page.file.src_path, error)
        return markdown
    if fresh != markdown:
        log.warning(
            "%s: a generated block is stale (%s); run `python docs/figures.py`",
            page.file.src_path,
            blocks.first_difference(markdown, fresh),
        )
    return fresh

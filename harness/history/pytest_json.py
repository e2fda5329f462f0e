"""A pytest-benchmark JSON file (``--benchmark-json``) as a history entry: a pytest user's
commits get the history, its change points and its dashboard with no scenario file.

pytest-benchmark records the commit (``commit_info``: its sha, whether the tree was
dirty, the branch), the machine (``machine_info``, to which the scanbench plugin adds
JAX's versions, backend, device kind and count, and the x64 flag) and, per test, its
timing statistics and ``extra_info``. A test that used the ``scanbench`` fixture stored
there the function's name, size, dtype and exact counts per call
(`scanbench.pytest_bench.benchmark_backend`). Each test becomes one cell:

- scenario: the test's id, its folders joined with "." (``tests.test_step.py::test_scan``:
  a cell's label is split on "/"), so two tests measuring functions of one name stay
  apart;
- backend, size, dtype: the fixture's (a plain pytest-benchmark test: its name,
  ``default``, ``-``);
- median, and the number of rounds as its samples; no interval: pytest-benchmark keeps
  none of the median (its ``iqr`` is of the rounds, not of their median), so a change
  between commits is read from the medians alone, as for any cell without one;
- counts and ``kernels_by_op``: the fixture's, exact.

Like a run, a file measured on a tree with uncommitted changes, or with no commit, is not
history: it is refused with the reason.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from ..api import StoreError
from .entry import CellPoint, Commit, Entry, Machine, Setup

SOURCE = "pytest-benchmark"  # a cell's source: measured by a test, not by a scenario


def is_pytest_benchmark(data: Any) -> bool:
    """Whether parsed JSON is pytest-benchmark's (``benchmarks`` and ``machine_info``)."""
    return (
        isinstance(data, dict)
        and isinstance(data.get("benchmarks"), list)
        and isinstance(data.get("machine_info"), dict)
    )


def _commit(info: Mapping[str, Any]) -> Commit:
    sha = info.get("id")
    if not isinstance(sha, str) or not sha:
        raise StoreError(
            "no git commit recorded (commit_info.id): run pytest inside the project's git work tree"
        )
    if info.get("dirty"):
        raise StoreError(
            f"measured on a tree with uncommitted changes (commit_info.dirty) at "
            f"{sha[:12]}: the commit is not what was measured; commit, then run again"
        )
    when = info.get("author_time") or info.get("time")
    return Commit(sha, when if isinstance(when, str) else None)


def _cell(bench: Mapping[str, Any]) -> CellPoint:
    extra = bench.get("extra_info") or {}
    stats = bench.get("stats") or {}
    median = stats.get("median")
    counts = extra.get("counts_per_call") or {}
    by_op = extra.get("kernels_by_op") or {}
    timed = "not_timed" not in extra and isinstance(median, int | float)
    return CellPoint(
        # a cell's label is split on "/": a test id's folders are joined with "."
        scenario=str(bench.get("fullname") or bench.get("name") or "?").replace("/", "."),
        backend=str(extra.get("backend") or bench.get("name") or "?"),
        size=str(extra.get("size") or "default"),
        dtype=str(extra.get("dtype") or "-"),
        status="ok",
        median=float(median) if timed else None,
        samples=int(stats.get("rounds") or 0) if timed else 0,
        counts={
            key: float(value)
            for key, value in counts.items()
            if isinstance(value, int | float) and not isinstance(value, bool)
        },
        breakdowns={"kernels_by_op": {k: float(v) for k, v in by_op.items()}} if by_op else {},
        source=SOURCE,
    )


def entry_of_pytest(
    data: Mapping[str, Any], source: str, machine: str | None = None, branch: str | None = None
) -> Entry:
    """The history entry of a pytest-benchmark JSON file (module doc); ``machine`` and
    ``branch`` replace what it recorded.

    Raises:
        StoreError: no commit, or a dirty tree, recorded.
    """
    info = data.get("commit_info") or {}
    commit = _commit(info)
    host = data["machine_info"]
    jax = host.get("jax") or {}
    cpu = host.get("cpu") or {}
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=True)
    recorded_branch = info.get("branch") if info.get("branch") not in (None, "HEAD") else None
    return Entry(
        run_id=hashlib.sha256(canonical.encode("utf-8")).hexdigest(),
        commit=commit,
        branch=branch or recorded_branch,
        machine=Machine(
            name=machine or host.get("node") or "unknown",
            hostname=host.get("node"),
            cpu_model=cpu.get("brand_raw") or host.get("processor") or None,
            cpu_count=cpu.get("count") if isinstance(cpu.get("count"), int) else None,
            platform=jax.get("backend"),
            device_kind=jax.get("device_kind"),
            device_count=jax.get("device_count"),
        ),
        setup=Setup(jax.get("jax"), jax.get("jaxlib"), "", jax.get("x64")),
        measured_at=data.get("datetime") if isinstance(data.get("datetime"), str) else None,
        source=source,
        cells=tuple(_cell(bench) for bench in data["benchmarks"]),
    )

"""The backends as pytest-benchmark tests: counts in extra_info, JAX in machine_info."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import outer_pytest_free
from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT


def test_benchmark_json_carries_counts_and_jax_metadata(tmp_path):
    out = tmp_path / "bench.json"
    command = [
        sys.executable, "-m", "pytest", "tests/benchmarks", "-q", "--benchmark-only",
        "-k", "tridiagonal/sequential-jax]", "--benchmark-max-time", "0.05",
        "--benchmark-json", str(out), "-p", "no:cacheprovider",
    ]  # fmt: skip
    result = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=300, env=outer_pytest_free()
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["machine_info"]["jax"]["backend"] == "cpu"
    (bench,) = data["benchmarks"]
    info = bench["extra_info"]
    assert (info["scenario"], info["backend"], info["strategy"]) == (
        "tridiagonal",
        "sequential-jax",
        "sequential",
    )
    # one jitted call per column forward and backward (2 x 100) + 2 eager setup ops
    assert info["counts_per_call"]["dispatches"] == 202
    assert info["probe_errors"] == {}
    assert bench["stats"]["rounds"] >= 1

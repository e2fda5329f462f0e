"""The machine's rates measured once per run (`scanbench.probes.rates`)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

from scanbench.probes.rates import (
    FAULT_BYTES,
    chain_step_s,
    device_flops_per_s,
    fault_cost,
    host_flops_per_s,
    measure_rates,
)


def test_the_arithmetic_rate_is_measured_on_one_thread_and_on_each():
    rate = host_flops_per_s("float64", threads=2)
    assert rate["one"] > 1e8 and rate["all"] > 1e8 and rate["threads"] == 2.0


def test_the_device_chain_runs_on_whatever_device_jax_gives():
    assert device_flops_per_s("float32", elements=2**12, rounds=2) > 1e6


def test_a_page_fault_costs_something_and_maps_one_base_page():
    """A base page's fault, whatever the kernel's transparent huge pages setting: the
    floor a cell's faults are priced at (a 2 MiB fault costs far more per fault)."""
    cost = fault_cost(nbytes=FAULT_BYTES, repeats=5)
    assert cost["fault_s"] > 0 and cost["fault_kind"] == "base page"
    assert cost["fault_bytes"] == resource.getpagesize()  # every page faulted, one by one


def test_a_huge_page_fault_is_priced_where_the_kernel_grants_huge_pages():
    """With transparent huge pages on request (``madvise``), one fault maps 2 MiB and
    costs more than a base page's, less per byte; without them no huge price is kept."""
    try:
        enabled = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        enabled = "[never]"
    cost = fault_cost(nbytes=FAULT_BYTES, repeats=5)
    if "[never]" in enabled:
        assert "fault_huge_s" not in cost
        return
    assert cost["fault_huge_bytes"] >= 2**20
    assert cost["fault_huge_s"] > cost["fault_s"]
    per_byte = cost["fault_huge_s"] / cost["fault_huge_bytes"]
    assert per_byte < cost["fault_s"] / cost["fault_bytes"]


def test_the_notebook_api_skips_the_arithmetic():
    rates = measure_rates("cpu", arithmetic=False)
    assert "flops_per_s" not in rates and rates["numpy_call_s"] > 0
    assert "chain_step_s" not in rates


def test_a_dependent_step_costs_its_latency_not_the_throughput():
    """A step of x = c / (b - a x) waits for the last: a divide's latency (nanoseconds on
    any CPU), many times what one flop costs where independent chains overlap."""
    step = chain_step_s("float64")
    flop = 1.0 / host_flops_per_s("float64", threads=1)["one"]
    assert 0.5e-9 < step < 1e-6
    assert step > 10 * flop, (step, flop)
    rates = measure_rates("cpu")
    assert set(rates["chain_step_s"]) == {"float32", "float64"}
    assert "waiting for the last" in rates["chain_kernel"]


KERNELS_FROM_THE_CACHE = """
import json, numpy as np
from scanbench.probes.rates import _kernels
from scanbench.probes.rate_kernels import dependent
one, every = _kernels()
for dtype in ("float32", "float64"):
    kind = np.dtype(dtype).type
    one(np.ones(16, dtype), kind(0.5), kind(0.5), 1)
    every(np.ones((2, 16), dtype), kind(0.5), kind(0.5), 1)
    dependent(kind(0.25), kind(2.0), kind(0.5), 1)
print(json.dumps([sum(k.stats.cache_misses.values()) for k in (one, every, dependent)]))
"""


def test_the_kernels_are_compiled_once_then_loaded_from_numbas_cache(tmp_path):
    """A closure is never found in Numba's cache again: the kernels must be module-level
    functions, or every run compiles them anew (about 1 s per dtype)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    command = [sys.executable, "-c", KERNELS_FROM_THE_CACHE]
    runs = [subprocess.run(command, env=env, capture_output=True, text=True) for _ in range(2)]
    assert all(run.returncode == 0 for run in runs), runs[-1].stderr[-2000:]
    first, second = (json.loads(run.stdout.splitlines()[-1]) for run in runs)
    assert first == [2, 2, 2]  # each kernel compiled for float32 and float64
    assert second == [0, 0, 0]  # then loaded

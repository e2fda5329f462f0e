"""The machine's rates measured once per run (`scanbench.probes.rates`)."""

from __future__ import annotations

from scanbench.probes.rates import (
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


def test_a_page_fault_costs_something_and_maps_at_least_a_page():
    cost = fault_cost(nbytes=8 * 2**20, repeats=3)
    assert cost["fault_s"] > 0 and cost["fault_bytes"] >= 4096


def test_the_notebook_api_skips_the_arithmetic():
    rates = measure_rates("cpu", arithmetic=False)
    assert "flops_per_s" not in rates and rates["numpy_call_s"] > 0

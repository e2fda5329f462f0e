"""pytest-benchmark integration: JAX and device metadata in ``machine_info``; the backend
benchmarks run only with ``--benchmark-only`` (a plain `pytest` skips them, saying so)."""

from __future__ import annotations

import pytest


def pytest_benchmark_update_machine_info(config, machine_info):
    """Add what decides a JAX benchmark's speed to pytest-benchmark's machine info."""
    import jax

    from harness.environment import device_info

    device = device_info()
    machine_info["jax"] = {
        "jax": jax.__version__,
        "jaxlib": jax.lib.__version__ if hasattr(jax.lib, "__version__") else None,
        "backend": jax.default_backend(),
        "device_kind": device.get("device_kind"),
        "device_count": jax.device_count(),
        "x64": bool(jax.config.jax_enable_x64),
    }


def pytest_collection_modifyitems(config, items):
    if config.getoption("benchmark_only", False):
        return
    skip = pytest.mark.skip(reason="backend benchmarks run with --benchmark-only")
    for item in items:
        if "benchmark" in getattr(item, "fixturenames", ()):
            item.add_marker(skip)

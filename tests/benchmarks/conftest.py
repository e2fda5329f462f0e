"""The backend benchmarks run only with ``--benchmark-only`` (a plain `pytest` skips them,
saying so); JAX's metadata in ``machine_info`` comes from the scanbench pytest plugin
(`scanbench.pytest_plugin`)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items):
    if config.getoption("benchmark_only", False):
        return
    skip = pytest.mark.skip(reason="backend benchmarks run with --benchmark-only")
    for item in items:
        if "benchmark" in getattr(item, "fixturenames", ()):
            item.add_marker(skip)

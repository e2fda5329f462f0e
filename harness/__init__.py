"""scanbench: a benchmark and profiling harness for JAX workloads.

The Python API for your own functions (`harness.functions`)::

    from harness import compare, profile, report
"""

__all__ = ["compare", "profile", "report"]


def __getattr__(name: str):
    """``compare``, ``profile`` and ``report`` from `harness.functions`, imported on first
    use (importing ``harness`` stays cheap for the worker processes)."""
    if name in __all__:
        from harness import functions

        return getattr(functions, name)
    raise AttributeError(f"module 'harness' has no attribute {name!r}")

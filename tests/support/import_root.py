"""Tests that call `scanbench.cli.main.main` in this process: its import-root change undone."""

from __future__ import annotations

import contextlib
import os
import sys


@contextlib.contextmanager
def own_import_root():
    """`main` puts the directory it runs in first on the import path of this process and
    of every process it starts (``PYTHONPATH`` in ``os.environ``): undone afterwards, so
    that a later test's subprocess does not import this checkout's folders."""
    saved = {key: os.environ.get(key) for key in ("PYTHONPATH", "SCANBENCH_IMPORT_ROOT")}
    path = list(sys.path)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        sys.path[:] = path

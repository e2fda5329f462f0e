"""Where the checkout, the tests and their shared files are: one place for every path."""

from __future__ import annotations

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
TESTS = SUPPORT.parent
REPO_ROOT = TESTS.parent
SCENARIO_FILES = SUPPORT / "scenario_files"
DATA = SUPPORT / "data"

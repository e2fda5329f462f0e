"""scanbench's error types (re-exported by `scanbench.api`, the public vocabulary).

The CLI catches `HarnessError` and prints one line; every other error of a cell is stored
with the cell.
"""

from __future__ import annotations


class HarnessError(Exception):
    """Base class of every error scanbench raises on purpose (the CLI prints one line)."""


class UnknownNameError(HarnessError, ValueError):
    """A name (scenario, backend, size, dtype, ...) that is not one of the allowed values."""

    def __init__(self, field: str, value: str, choices: list[str] | tuple[str, ...], where=""):
        self.field, self.value, self.choices = field, value, tuple(choices)
        scope = f" for {where}" if where else ""
        super().__init__(
            f"unknown {field} {value!r}{scope}; choose one of: {', '.join(self.choices)}"
        )


class InputError(HarnessError, ValueError):
    """A parameter value outside its allowed range."""


class MismatchError(HarnessError):
    """A backend's output disagrees with the scenario's reference answer."""

    def __init__(self, message: str, max_error: float, tolerance: float):
        self.message, self.max_error, self.tolerance = message, max_error, tolerance
        super().__init__(f"{message} (max error {max_error:.3e} > tolerance {tolerance:.1e})")


class StoreError(HarnessError):
    """A results file that cannot be read: missing, malformed, or of another schema."""


class SchemaVersionError(StoreError):
    """A scanbench results file of another schema version (reports show it apart)."""

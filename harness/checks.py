"""Strict correctness checks around a scenario's own ``check``.

A number is only reported for a backend whose output is right, so before and after it is
timed a backend's output must pass all of:

- no NaN or inf where the reference has none (`nonfinite`), whatever the scenario's
  ``check`` says: a NaN compares false with every tolerance, so a hand-written check
  easily lets it through;
- ``check(output, expected, dtype)`` returns a finite max error (`checked_error`);
- the backend left its inputs alone (`InputSnapshot`): a backend that updates its
  inputs in place (the NumPy ``tdma_naive`` of JAX issue #2491 does) is right once and
  wrong on every later call, which the max error alone does not explain;
- it still matches after repeated calls (`check_again`).

Imports only NumPy, JAX's tree utilities and `scanbench.api`, so `scanbench.gate.serve` can load
the candidate's copy by path inside a baseline checkout.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from .api import HarnessError, MismatchError

CheckFn = Callable[[Any, Any, str], Any]


class OutputError(HarnessError):
    """A backend's output is invalid (NaN/inf), or its check did not return a number."""


class RepeatMismatchError(HarnessError):
    """A backend that matched on its first call and no longer does."""


class InputMutationError(HarnessError):
    """A backend modified the inputs it was given."""


class StatefulError(MismatchError):
    """A backend whose output changes from call to call on the same inputs: it keeps
    state, so its output cannot be compared with one reference answer as it is."""


def leaf_path(tree: Any, path: str) -> str:
    """A leaf's path as a reader names it: a named tuple's type, then JAX's key path
    (``EvaluationResult.iteration``), else the key path alone (``[2]['loss']``)."""
    head = type(tree).__name__
    if head in ("tuple", "list", "dict") or hasattr(tree, "dtype") or not hasattr(tree, "_fields"):
        return "(the whole output)" if path == "(root)" else path
    return head if path == "(root)" else f"{head}{path}"


def first_difference(first: Any, second: Any) -> str | None:
    """Where two outputs of the same call differ (``path: a vs b``), or None when they
    are the same (NaN equal to NaN)."""
    a, b = _leaves_with_paths(first), _leaves_with_paths(second)
    if [path for path, _ in a] != [path for path, _ in b]:
        return "the structure of the output"
    for (path, x), (_, y) in zip(a, b, strict=True):
        left, right = _as_numeric(x), _as_numeric(y)
        if left is None or right is None:
            if x is not y and x != y:
                return f"{leaf_path(first, path)}: {x!r:.60} vs {y!r:.60}"
            continue
        if left.shape != right.shape:
            return f"{leaf_path(first, path)}: shape {left.shape} vs {right.shape}"
        same = (left == right) | ((left != left) & (right != right))
        if not np.all(same):
            at = int(np.argmin(same.reshape(-1))) if same.size else 0
            return (
                f"{leaf_path(first, path)}: {left.reshape(-1)[at]!r} vs "
                f"{right.reshape(-1)[at]!r} (flat index {at})"
            )
    return None


def stateful_or(error: MismatchError, again: Callable[[], Any], first: Any) -> MismatchError:
    """The error to raise for a first output that failed its check: a `StatefulError`
    when calling again on the same inputs (``again()``, after the backend's setup) gives
    another output, which says the function keeps state; ``error`` otherwise."""
    differs = first_difference(first, again())
    if differs is None:
        return error
    return StatefulError(
        f"the output changes from call to call on the same inputs ({differs}): the "
        "function keeps state (an optimizer that advances, a counter). Restore or rebuild "
        "the state before every call with setup= (Backend.setup; run untimed), or time it "
        f"unchecked with check=False (Backend.checked=False); the check said: "
        f"{getattr(error, 'message', error)}",
        error.max_error,
        error.tolerance,
    )


def _leaves_with_paths(tree: Any) -> list[tuple[str, Any]]:
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [(jax.tree_util.keystr(path) or "(root)", leaf) for path, leaf in flat]


def _as_numeric(leaf: Any) -> np.ndarray | None:
    """The leaf as a NumPy array when it holds numbers (floats, ints, complex), else None."""
    try:
        array = np.asarray(leaf)
    except Exception:  # an opaque leaf (a config object): not data
        return None
    return array if array.dtype.kind in "fciub" else None


def nonfinite(tree: Any) -> list[tuple[str, int, int, int]]:
    """(leaf path, NaN count, inf count, size) for every leaf holding NaN or inf."""
    found = []
    for path, leaf in _leaves_with_paths(tree):
        array = _as_numeric(leaf)
        if array is None or array.dtype.kind not in "fc":
            continue
        nans = int(np.isnan(array).sum())
        infs = int(np.isinf(array).sum())
        if nans or infs:
            found.append((path, nans, infs, int(array.size)))
    return found


def check_of(scenario: Any, backend: Any, prepared: Any) -> CheckFn:
    """The check a backend's output faces: the scenario's, or the backend's own
    (`scanbench.api.Backend.check`: a roofline kernel computes the scenario's arithmetic, not
    its answer, and is checked against that arithmetic)."""
    own = getattr(backend, "check", None)
    if own is None:
        return scenario.check
    return lambda output, expected, dtype: own(prepared, output)


def checked_error(
    check: CheckFn, output: Any, expected: Any, dtype: str, where: str = "the output"
) -> float:
    """Run the scenario's check after the NaN/inf test; return its finite max error.

    Raises:
        OutputError: ``output`` holds NaN or inf and ``expected`` does not, or the check
            returned something that is not a finite number.
        MismatchError: from the scenario's check.
    """
    bad = nonfinite(output)
    if bad and not nonfinite(expected):
        parts = ", ".join(
            f"{path}: {nans} NaN and {infs} inf of {size}" for path, nans, infs, size in bad[:3]
        )
        raise OutputError(f"{where} holds NaN or inf where the reference has none ({parts})")
    error = check(output, expected, dtype)
    try:
        value = float(error)
    except (TypeError, ValueError):
        raise OutputError(
            f"the scenario's check must return the max error as a number, got {error!r}"
        ) from None
    if not np.isfinite(value):
        raise OutputError(
            f"the scenario's check returned a max error of {value} for {where}: "
            "a NaN or inf error is never a match"
        )
    return value


def check_again(check: CheckFn, output: Any, expected: Any, dtype: str, calls: int) -> float:
    """The check of a later output (after ``calls`` calls), saying the first one matched."""
    try:
        return checked_error(check, output, expected, dtype, f"the output after {calls} calls")
    except HarnessError as error:
        raise RepeatMismatchError(
            f"matched the reference on the first call, differs after {calls} calls: "
            f"{type(error).__name__}: {error}"
        ) from error


@dataclasses.dataclass(frozen=True)
class InputSnapshot:
    """Copies of the numeric leaves of a host input pytree, to detect in-place updates."""

    leaves: tuple[tuple[str, np.ndarray], ...]

    @classmethod
    def of(cls, inputs: Any) -> InputSnapshot:
        copies = []
        for path, leaf in _leaves_with_paths(inputs):
            if isinstance(leaf, np.ndarray | np.generic):
                copies.append((path, np.array(leaf, copy=True)))
        return cls(tuple(copies))

    def changed(self, inputs: Any) -> list[str]:
        """Descriptions of the leaves that differ now ("b: 990 of 100000 values")."""
        now = dict(_leaves_with_paths(inputs))
        changes = []
        for path, before in self.leaves:
            after = np.asarray(now.get(path))
            if after.shape != before.shape or after.dtype != before.dtype:
                changes.append(f"{path}: now shape {after.shape} {after.dtype}")
                continue
            same = (after == before) | (
                (after != after) & (before != before) if before.dtype.kind in "fc" else False
            )
            differing = int(np.size(same) - np.count_nonzero(same))
            if differing:
                changes.append(f"{path}: {differing} of {before.size} values")
        return changes

    def verify(self, inputs: Any, when: str) -> None:
        """Raise InputMutationError naming the changed leaves, if any."""
        changes = self.changed(inputs)
        if changes:
            raise InputMutationError(
                f"the backend modified its inputs in place {when} ({'; '.join(changes)}); "
                "later calls would see other inputs: work on copies"
            )

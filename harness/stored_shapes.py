"""The nested fields of a stored record that the reports compute with, and what each must
be: one table (`NESTED_FIELDS`), checked as a results file is read (`scanbench.results`).

A record's ``counts``, ``extra`` and ``device`` hold the probes' own JSON; the reports do
arithmetic on many of their numbers (kernels per call, bytes, phase seconds). A string or
an object in place of one of them, in an edited or damaged file, made ``scanbench
report`` crash (exit 70) deep in a table. Each pattern names a path (``*``: any key of an
object, ``[]``: any item of a list); a value found there must pass its check, and a key
that is absent is fine (older files, probes that did not run). Only the paths listed are
checked, so a field a probe adds later is never refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .counts import COUNT_KEYS
from .errors import StoreError


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number_or_null(value: Any) -> bool:
    return value is None or _number(value)


def _object(value: Any) -> bool:
    return isinstance(value, dict)


def _objects(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


NUMBER = (_number, "a number")
NUMBER_OR_NULL = (_number_or_null, "a number or null")
OBJECT = (_object, "an object")
OBJECTS = (_objects, "a list of objects")

_MEMORY_BYTES = ("input_bytes", "output_bytes", "minimum_bytes", "planned_bytes", "temp_bytes")
_EXECUTABLE_NUMBERS = (
    "calls_per_run",
    "conditionals",
    "copies_inside_loops",
    "copies_outside_loops",
    "kernels",
    "launch_equivalent",
    "transposes_inside_loops",
    "transposes_outside_loops",
    "unknown_trip_count_loops",
)
_LOOP_NUMBERS = (
    "body_kernels",
    "condition_kernels",
    "copies_in_body",
    "transposes_in_body",
    "trip_count",
)

# path (in a record) -> (check, what it must be)
NESTED_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "counts.calls": NUMBER,
    "counts.scale": NUMBER,
    **{f"counts.{key.section}.{key.field}": NUMBER_OR_NULL for key in COUNT_KEYS},
    **{
        f"counts.{key.fallback[0]}.{key.fallback[1]}": NUMBER_OR_NULL
        for key in COUNT_KEYS
        if key.fallback
    },
    **{f"counts.{key.section}.{key.breakdown}": OBJECT for key in COUNT_KEYS if key.breakdown},
    **{f"counts.{key.section}.{key.breakdown}.*": NUMBER for key in COUNT_KEYS if key.breakdown},
    "counts.trace.kernels_by_module.*": NUMBER,
    **{
        f"counts.compilations.{key}": NUMBER_OR_NULL
        for key in ("compiles", "traces", "lowerings", "compile_s", "lower_s", "trace_s")
    },
    "counts.compilations.total_s": NUMBER,
    **{f"counts.memory.{key}": NUMBER_OR_NULL for key in _MEMORY_BYTES},
    "counts.memory.measured": OBJECT,
    "counts.memory.measured.bytes": NUMBER,
    "counts.memory.temporaries": OBJECTS,
    "counts.memory.temporaries.[].bytes": NUMBER,
    **{
        f"counts.spans.{key}": NUMBER
        for key in ("busy_events", "events", "host_conversions", "wall_s", "device_busy_s")
    },
    "counts.spans.inline_busy_s": NUMBER,
    "counts.spans.kernel_busy_s": NUMBER,
    "counts.spans.busy_by_device": OBJECT,
    "counts.spans.busy_by_device.*": NUMBER,
    "counts.static.unknown_trip_count_loops": NUMBER,
    "counts.static.executables": OBJECT,
    "counts.static.executables.*": OBJECT,
    **{f"counts.static.executables.*.{key}": NUMBER for key in _EXECUTABLE_NUMBERS},
    "counts.static.executables.*.loops": OBJECTS,
    **{f"counts.static.executables.*.loops.[].{key}": NUMBER for key in _LOOP_NUMBERS},
    "counts.static.executables.*.memory": OBJECT,
    "counts.static.executables.*.memory.temporaries": OBJECTS,
    "counts.static.executables.*.memory.temporaries.[].bytes": NUMBER,
    **{f"counts.static.executables.*.memory.{key}": NUMBER for key in _MEMORY_BYTES},
    "extra.phases_s": OBJECT,
    "extra.phases_s.*": NUMBER,
    **{f"device.{key}": NUMBER_OR_NULL for key in ("cell_devices", "device_count", "processes")},
    "stats.count": NUMBER_OR_NULL,
    "interference.reasons": (
        lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
        "a list of strings",
    ),
    "sampling.rel_width": NUMBER_OR_NULL,
}


def _found(value: Any, steps: list[str], path: str) -> Iterator[tuple[str, Any]]:
    """(path, value) of every value at ``steps`` below ``value``."""
    if not steps:
        yield path, value
        return
    step, rest = steps[0], steps[1:]
    if step == "[]":
        if isinstance(value, list):
            for index, item in enumerate(value):
                yield from _found(item, rest, f"{path}[{index}]")
    elif isinstance(value, Mapping):
        keys = list(value) if step == "*" else [step] if step in value else []
        for key in keys:
            yield from _found(value[key], rest, f"{path}.{key}" if path else str(key))


def check_nested(record: Mapping[str, Any]) -> None:
    """Raise `StoreError` naming the first nested field of a stored record (`NESTED_FIELDS`)
    that is not what the reports compute with."""
    for pattern, (check, what) in NESTED_FIELDS.items():
        for path, value in _found(record, pattern.split("."), ""):
            if not check(value):
                raise StoreError(f"field {path!r} must be {what}, got {value!r:.80}")

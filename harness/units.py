"""Numbers as a reader wants them: durations in adaptive units, SI-scaled amounts."""

from __future__ import annotations

import math


def _missing(value) -> bool:
    """No number to show: None, NaN, or an overflow (a 1e-299 s median gives inf/s)."""
    return value is None or (isinstance(value, float) and not math.isfinite(value))


def format_seconds(value: float | None) -> str:
    """A duration with 3 significant digits in s, ms, us or ns: "31.2 s", "4.05 ms"."""
    if _missing(value):
        return "-"
    if value == 0:
        return "0"
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value * 1e9:.3g} ns"


def number(value: float | None) -> str:
    """3 significant digits with an SI suffix: 0.512, 42.1, 250 k, 1.32 M."""
    if _missing(value):
        return "-"
    for scale, suffix in ((1e12, " T"), (1e9, " G"), (1e6, " M"), (1e3, " k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def format_duration(value: float | None) -> str:
    """A wall-clock span for progress lines: "42.0 s", "3 min 05 s", "1 h 02 min"."""
    if _missing(value):
        return "-"
    if value < 60:
        return f"{value:.1f} s"
    minutes, seconds = divmod(round(value), 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"

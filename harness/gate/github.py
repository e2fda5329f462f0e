"""The gate's verdict where GitHub Actions shows it (``scanbench gate --github``).

- the job summary (``$GITHUB_STEP_SUMMARY``): the gate's markdown, cut at a line so that
  the step's whole summary file (what earlier commands of the step appended, too) stays
  below GitHub's 1 MiB cap per step, with a line saying so (`append_summary`: GitHub drops
  a step's whole summary past the cap);
- annotations: one ``::error`` per failed rule and one ``::warning`` per inconclusive
  one, at most 10 of each (what a step shows), the rest named in one more;
- step outputs (``$GITHUB_OUTPUT``): ``verdict`` (``pass``, ``fail`` or
  ``inconclusive``) and the numbers of ``passed``, ``failed`` and ``inconclusive`` rules.

Pure functions build the text (tested without GitHub); `publish` appends it to the files
the runner names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..credentials import redact
from ..shown_text import for_terminal
from .decide import Outcome, Verdict
from .render import describe

SUMMARY_LIMIT = 1_000_000  # bytes: GitHub refuses a step summary over 1 MiB (1,048,576)
ANNOTATION_LIMIT = 10  # GitHub shows at most 10 annotations of each kind per step
LEVELS = {Outcome.FAIL: "error", Outcome.INCONCLUSIVE: "warning"}


def summary(markdown: str, limit: int = SUMMARY_LIMIT) -> str:
    """``markdown`` as the job summary: whole when it fits in ``limit`` bytes, else cut at
    a line boundary with a last line saying how much was left out."""
    data = markdown.encode("utf-8")
    if len(data) <= limit:
        return markdown
    note = (
        f"\n\n*The summary is cut here: {{kept:,}} of {len(data):,} bytes (GitHub's limit is "
        "1 MiB); the whole report is in the uploaded artifact.*\n"
    )
    room = max(0, limit - len(note.format(kept=limit).encode("utf-8")))
    kept = data[:room].decode("utf-8", errors="ignore")
    kept = kept[: kept.rfind("\n")] if "\n" in kept else kept
    cut = kept + note.format(kept=len(kept.encode("utf-8")))
    return cut if len(cut.encode("utf-8")) <= limit else ""  # not even the note fits


def append_summary(path: str | os.PathLike[str], markdown: str, limit: int = SUMMARY_LIMIT) -> int:
    """Append ``markdown`` (credentials redacted) to the step summary file at ``path``,
    cut (`summary`) to the room the file has left below ``limit`` bytes; returns the
    bytes appended (0 when the file is already full)."""
    target = Path(path)
    try:
        used = target.stat().st_size
    except FileNotFoundError:
        used = 0
    room = limit - used - 1  # the last newline
    if room <= 0:
        return 0
    text = summary(for_terminal(redact(markdown)), room)  # encodable, no escape sequence
    if not text:  # not even the note that it was cut fits
        return 0
    text += "\n"
    with target.open("a", encoding="utf-8") as handle:
        handle.write(text)
    return len(text.encode("utf-8"))


def _escape(text: str, property_value: bool = False) -> str:
    """A workflow command's data (or property value), escaped as the runner reads it."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property_value else text


def annotations(verdicts: Sequence[Verdict], limit: int = ANNOTATION_LIMIT) -> list[str]:
    """``::error``/``::warning`` workflow commands: one per failed or inconclusive rule,
    at most ``limit`` of each kind, then one naming those left out."""
    lines = []
    for outcome, level in LEVELS.items():
        chosen = [v for v in verdicts if v.outcome == outcome]
        for verdict in chosen[:limit]:
            title = _escape(f"scanbench gate: {verdict.rule} {outcome}", property_value=True)
            lines.append(f"::{level} title={title}::{_escape(redact(describe(verdict)))}")
        rest = chosen[limit:]
        if rest:
            names = ", ".join(v.rule for v in rest)
            lines.append(f"::{level}::{_escape(f'{len(rest)} more {outcome} rules: {names}')}")
    return lines


def outputs(verdicts: Sequence[Verdict]) -> dict[str, str]:
    """The step outputs: the overall verdict and how many rules ended each way."""
    counted = {outcome: sum(v.outcome == outcome for v in verdicts) for outcome in Outcome}
    verdict = (
        "fail"
        if counted[Outcome.FAIL]
        else "inconclusive"
        if counted[Outcome.INCONCLUSIVE]
        else "pass"
    )
    return {
        "verdict": verdict,
        "passed": str(counted[Outcome.PASS]),
        "failed": str(counted[Outcome.FAIL]),
        "inconclusive": str(counted[Outcome.INCONCLUSIVE]),
    }


def publish(
    markdown: str, verdicts: Sequence[Verdict], environ: Mapping[str, str] = os.environ
) -> list[str]:
    """Append the summary and the outputs to the files the runner names (when it names
    them) and return the annotation lines (to print on stdout)."""
    if environ.get("GITHUB_STEP_SUMMARY"):
        append_summary(environ["GITHUB_STEP_SUMMARY"], markdown)
    if environ.get("GITHUB_OUTPUT"):
        with Path(environ["GITHUB_OUTPUT"]).open("a", encoding="utf-8") as handle:
            handle.writelines(f"{key}={value}\n" for key, value in outputs(verdicts).items())
    return annotations(verdicts)

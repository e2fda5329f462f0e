"""Find the first commit of a range where a cell changed (``scanbench bisect``).

The range is BAD's first-parent line back to GOOD (GOOD must be on it), as the history's
main line is; each revision is measured in a temporary git worktree by the gate's served
worker (`scanbench.gate.interleave.ServedCell`: the revision's own code, timed and counted
by this installation).

- **Counts** (default): a revision is *bad* when any per-call count the gate explains
  (`scanbench.gate.explain.COUNTED`: transfers, host conversions, compilations, traces,
  dispatches, GPU launch equivalents, kernels) differs from GOOD's. Counts are exact, so
  this is a plain binary search.
- **Time** (``factor``): each revision against GOOD, interleaved in randomized blocks
  (`measure_blocks`) and decided by the gate's `paired_decision` with ``delta = factor -
  1``: *bad* when the lower bound of the ratio exceeds the factor (and the slowdown the
  floor), *good* when the upper bound is below it (or the difference is below the
  floor), else *undecided*: measured again in fresh workers, the blocks pooled, at most
  ``retries`` times, and never guessed.

A revision that cannot be measured (the scenario file is missing, the code fails) is
*skipped*; one still undecided is set aside too: as ``git bisect skip`` does, the search
goes on around it, and when the first change may be one of them it names them all
instead of picking one. The found commit is explained as the gate
explains a regression: what differs between its parent's facts and its own
(`scanbench.gate.explain.differences`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ..api import HarnessError, InputError
from ..gate.decide import PairedDecision, block_ratios, paired_decision
from ..gate.explain import COUNTED, Difference, Facts, differences
from ..gate.interleave import SIDES, ServedCell, Side, measure_blocks, worktree
from ..gate.rules import BaselineRule, Settings
from ..statistics import median_interval


class Mark(enum.StrEnum):
    GOOD = "good"
    BAD = "bad"
    SKIP = "skipped"  # could not be measured
    UNDECIDED = "undecided"  # time: the interval still straddles the factor


class Role(enum.StrEnum):
    """What a measured revision is to the search: one of its ends, or a step."""

    GOOD = "good"
    BAD = "bad"
    STEP = "step"


class Mode(enum.StrEnum):
    COUNTS = "counts"  # any per-call count differs from GOOD's
    TIME = "time"  # slower than GOOD by more than the factor


class Status(enum.StrEnum):
    """How a search ended."""

    FOUND = "found"
    NO_CHANGE = "no change"  # GOOD and BAD do not differ
    UNDECIDED = "undecided"  # the first change may be a commit still undecided
    SKIPPED = "skipped"  # the first change may be a commit that could not be measured


@dataclasses.dataclass(frozen=True)
class Revision:
    sha: str
    subject: str = ""
    date: str = ""
    parents: tuple[str, ...] = ()

    @property
    def short(self) -> str:
        return self.sha[:7]


@dataclasses.dataclass(frozen=True)
class CountEvidence:
    """The revision's counts per call, and those that differ from GOOD's (key, at GOOD,
    here)."""

    counts: Mapping[str, float | None]
    differs: tuple[tuple[str, float | None, float | None], ...]


@dataclasses.dataclass(frozen=True)
class TimeEvidence:
    """The paired decisions against GOOD after each measurement (blocks pooled), the
    upper bound of the ratio after each, and the factor they were held to."""

    factor: float
    floor_s: float
    confidence: float
    decisions: tuple[PairedDecision, ...]
    uppers: tuple[float, ...]
    blocks: int  # pooled blocks behind the last decision


@dataclasses.dataclass(frozen=True)
class Step:
    """One measured revision, an end of the range or a step of the search."""

    role: Role
    revision: Revision
    mark: Mark
    evidence: CountEvidence | TimeEvidence | None = None
    error: str = ""
    left: int = 0  # commits in question when this step was taken


@dataclasses.dataclass(frozen=True)
class Result:
    """The search's answer: ``first`` is the first changed commit when found; otherwise
    ``candidates`` are the commits it may be (skipped or undecided in between)."""

    cell: str
    mode: Mode
    good: Revision
    bad: Revision
    revisions: tuple[Revision, ...]  # after GOOD, oldest first; the last is BAD
    steps: tuple[Step, ...]
    status: Status
    first: Revision | None = None
    last_good: Revision | None = None
    candidates: tuple[Revision, ...] = ()
    differences: tuple[Difference, ...] | None = None
    explain_error: str = ""


def search(
    count: int, classify: Callable[[int, int, int], Mark]
) -> tuple[int, int, tuple[tuple[int, Mark], ...]]:
    """Binary search over indices 0..count-1 (index count-1 known bad, -1 known good),
    calling ``classify(index, last good, first bad)``. An index it cannot classify
    (skipped, or undecided after its re-measurements) is set aside and the search goes
    on around it, as ``git bisect skip`` does. Returns (last good, first bad, the indices
    set aside between them with their marks): the first bad is exact when none are."""
    good, bad = -1, count - 1
    aside: dict[int, Mark] = {}
    while bad - good > 1:
        open_ = [i for i in range(good + 1, bad) if i not in aside]
        if not open_:
            break
        middle = (good + bad) / 2
        probe = min(open_, key=lambda i: (abs(i - middle), i))
        mark = classify(probe, good, bad)
        if mark == Mark.GOOD:
            good = probe
        elif mark == Mark.BAD:
            bad = probe
        else:
            aside[probe] = mark
    return good, bad, tuple(sorted((i, m) for i, m in aside.items() if good < i < bad))


# ------------------------------------------------------------------ git


def git(repository: Path, *args: str) -> subprocess.CompletedProcess:
    """``git *args`` in ``repository`` (git from PATH, as the user's shell finds it); a
    user-given revision in ``args`` always follows ``--end-of-options``, so that one
    spelled like an option (``--output=FILE``) is read as a revision, never obeyed."""
    command = ["git", *args]
    return subprocess.run(command, cwd=repository, capture_output=True, text=True)  # noqa: S603


def _git(repository: Path, *args: str) -> str:
    done = git(repository, *args)
    if done.returncode != 0:
        raise HarnessError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def resolve(repository: Path, revision: str, what: str) -> Revision:
    """The commit ``revision`` names, with its subject, date and parents."""
    done = git(
        repository,
        *("log", "-1", "--format=%H%x00%s%x00%aI%x00%P", "--end-of-options"),
        *(f"{revision}^{{commit}}", "--"),
    )
    if done.returncode != 0 or not done.stdout.strip():
        inside = git(repository, "rev-parse", "--git-dir")
        if inside.returncode != 0:
            raise InputError(
                f"{repository} is not a git repository: run scanbench bisect inside the "
                "project's git work tree"
            )
        raise InputError(f"{what} {revision!r}: not a commit of {repository}")
    sha, subject, date, parents = done.stdout.rstrip("\n").split("\x00")
    return Revision(sha, subject, date, tuple(parents.split()))


def first_parent_range(repository: Path, good: Revision, bad: Revision) -> tuple[Revision, ...]:
    """The commits after GOOD on BAD's first-parent line, oldest first (BAD last).

    Raises:
        InputError: GOOD is not an ancestor of BAD on its first-parent line.
    """
    if good.sha == bad.sha:
        raise InputError(f"GOOD and BAD are the same commit ({good.short})")
    ancestor = git(repository, "merge-base", "--is-ancestor", "--end-of-options", good.sha, bad.sha)
    if ancestor.returncode != 0:
        raise InputError(f"GOOD {good.short} is not an ancestor of BAD {bad.short}")
    listed = _git(
        repository,
        "log",
        "--first-parent",
        "--reverse",
        "--format=%H%x00%s%x00%aI%x00%P",
        "--end-of-options",
        f"{good.sha}..{bad.sha}",
    )
    revisions = []
    for line in listed.splitlines():
        sha, subject, date, parents = line.split("\x00")
        revisions.append(Revision(sha, subject, date, tuple(parents.split())))
    if not revisions or revisions[0].parents[:1] != (good.sha,):
        raise InputError(
            f"GOOD {good.short} is not on the first-parent line of BAD {bad.short} (it is on "
            "a merged branch); give a commit of the main line, e.g. the merge base"
        )
    return tuple(revisions)


# ------------------------------------------------------------------ measuring


def one_line(error: Exception) -> str:
    """An error as one line: a worker's traceback shortened to its first and last lines."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    return " ... ".join([lines[0], lines[-1]] if len(lines) > 1 else lines)


def counts_facts(rule: BaselineRule, tree: Path, home: Path, timeout_s: float) -> Facts:
    """The facts (`scanbench.gate.explain`) of the cell in ``tree``: one served worker,
    one counted call, no timing.

    Raises:
        HarnessError: the worker could not load, check or count the cell.
    """
    others = [] if tree.resolve() == home.resolve() else [home.resolve()]
    with ServedCell(rule, Side(tree, home=home), timeout_s, None, others) as served:
        facts, why = served.explain()
    if facts is None:
        raise HarnessError(f"no counts: {why}")
    return facts


def count_differences(
    good: Facts, here: Facts
) -> tuple[tuple[str, float | None, float | None], ...]:
    """The gate's per-call counts that differ between two revisions (exact)."""
    return tuple(
        (key, good.counts.get(key), here.counts.get(key))
        for key in COUNTED
        if good.counts.get(key) != here.counts.get(key)
    )


def upper_bound(blocks: Mapping[str, Sequence[Sequence[float]]], confidence: float) -> float:
    """One-sided upper ``confidence`` bound of the median of per-block ratios (candidate
    block median / baseline block median), the mirror of `paired_decision`'s lower one
    (inf: too few blocks for one)."""
    ratios = block_ratios(blocks["baseline"], blocks["candidate"])
    return median_interval(ratios, confidence, "less")[1]


@dataclasses.dataclass(frozen=True)
class TimeSettings:
    """How a time step is decided: the factor, the gate's settings, the retries."""

    factor: float
    settings: Settings
    retries: int = 2
    timeout_s: float = 900.0


def time_step(
    rule: BaselineRule, sides: Mapping[str, Side], how: TimeSettings, seed: int
) -> tuple[Mark, TimeEvidence, Mapping[str, Facts | None]]:
    """Candidate vs baseline (GOOD), interleaved; measured again (blocks pooled) while
    the interval straddles the factor, at most ``how.retries`` more times."""
    settings = rule.settings(how.settings)
    pooled: dict[str, list] = {side: [] for side in SIDES}
    decisions, uppers, facts = [], [], {}
    for attempt in range(1 + how.retries):
        measured = measure_blocks(
            rule, sides, how.settings, seed + attempt, how.timeout_s, explain=not facts
        )
        facts = facts or dict(measured.facts)
        for side in SIDES:
            pooled[side] += measured.blocks[side]
        decision = paired_decision(
            pooled["baseline"],
            pooled["candidate"],
            how.factor - 1,
            rule.floor_s,
            settings.confidence,
        )
        decisions.append(decision)
        uppers.append(upper_bound(pooled, settings.confidence))
        evidence = TimeEvidence(
            how.factor,
            rule.floor_s,
            settings.confidence,
            tuple(decisions),
            tuple(uppers),
            len(pooled["baseline"]),
        )
        if decision.suspect:
            return Mark.BAD, evidence, facts
        if uppers[-1] <= how.factor or decision.difference_s <= rule.floor_s:
            return Mark.GOOD, evidence, facts
    return Mark.UNDECIDED, evidence, facts


# ------------------------------------------------------------------ the search


class Bisect:
    """One bisect: the range, the measuring of one revision, the cache of facts."""

    def __init__(
        self,
        rule: BaselineRule,
        repository: Path,
        good: Revision,
        bad: Revision,
        time: TimeSettings | None,
        timeout_s: float,
        report: Callable[[Step], None],
    ):
        self.rule, self.repository, self.time = rule, repository, time
        self.good, self.bad, self.timeout_s, self.report = good, bad, timeout_s, report
        self.revisions = first_parent_range(repository, good, bad)
        self.facts: dict[str, Facts] = {}
        self.steps: list[Step] = []
        self.good_tree: Path | None = None

    def _record(self, step: Step) -> Mark:
        self.steps.append(step)
        self.report(step)
        return step.mark

    def measure(self, revision: Revision, role: Role, left: int = 0) -> Mark:
        """Measure one revision against GOOD and record the step."""
        try:
            with worktree(revision.sha, self.repository) as tree:
                if self.time is None:
                    return self._record(self._counts(revision, tree, role, left))
                return self._record(self._times(revision, tree, role, left))
        except HarnessError as error:
            if role != Role.STEP:  # an end that cannot be measured: nothing to search
                raise HarnessError(f"{role.upper()} {revision.short}: {error}") from None
            return self._record(Step(role, revision, Mark.SKIP, error=one_line(error), left=left))

    def _counts(self, revision: Revision, tree: Path, role: Role, left: int) -> Step:
        facts = counts_facts(self.rule, tree, self.repository, self.timeout_s)
        self.facts[revision.sha] = facts
        if role == Role.GOOD:
            return Step(role, revision, Mark.GOOD, CountEvidence(dict(facts.counts), ()))
        differs = count_differences(self.facts[self.good.sha], facts)
        mark = Mark.BAD if differs else Mark.GOOD
        return Step(role, revision, mark, CountEvidence(dict(facts.counts), differs), left=left)

    def _times(self, revision: Revision, tree: Path, role: Role, left: int) -> Step:
        sides = {
            "baseline": Side(self.good_tree, home=self.repository),
            "candidate": Side(tree, home=self.repository),
        }
        seed = self.time.settings.seed + 1000 * len(self.steps)
        mark, evidence, facts = time_step(self.rule, sides, self.time, seed)
        if facts.get("baseline") is not None:
            self.facts.setdefault(self.good.sha, facts["baseline"])
        if facts.get("candidate") is not None:
            self.facts[revision.sha] = facts["candidate"]
        return Step(role, revision, mark, evidence, left=left)

    def run(self) -> Result:
        with contextlib.ExitStack() as stack:
            if self.time is None:
                self.measure(self.good, Role.GOOD)
            else:
                self.good_tree = stack.enter_context(worktree(self.good.sha, self.repository))
            ends = self.measure(self.bad, Role.BAD, len(self.revisions))
            if ends != Mark.BAD:
                status = Status.NO_CHANGE if ends == Mark.GOOD else Status.UNDECIDED
                return self._result(status)
            lo, hi, aside = search(len(self.revisions), self._classify)
            return self._finish(lo, hi, aside)

    def _classify(self, index: int, good: int, bad: int) -> Mark:
        return self.measure(self.revisions[index], Role.STEP, bad - good - 1)

    def _finish(self, lo: int, hi: int, aside: tuple[tuple[int, Mark], ...]) -> Result:
        last_good = self.good if lo < 0 else self.revisions[lo]
        if aside:  # the first bad is one of those set aside, or the first bad found
            undecided = Mark.UNDECIDED in dict(aside).values()
            status = Status.UNDECIDED if undecided else Status.SKIPPED
            candidates = tuple(self.revisions[i] for i in (*dict(aside), hi))
            return self._result(status, last_good=last_good, candidates=candidates)
        first = self.revisions[hi]
        before, after = self.facts.get(last_good.sha), self.facts.get(first.sha)
        if before is None or after is None:
            return self._result(Status.FOUND, first, last_good, explain_error="no facts of a side")
        found = differences(before, after)
        return self._result(Status.FOUND, first, last_good, differences=found)

    def _result(self, status: Status, first=None, last_good=None, **more) -> Result:
        mode = Mode.COUNTS if self.time is None else Mode.TIME
        return Result(
            self.rule.label,
            mode,
            self.good,
            self.bad,
            self.revisions,
            tuple(self.steps),
            status,
            first,
            last_good,
            **more,
        )

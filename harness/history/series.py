"""The history as series: commits in order, and per cell one series per (machine,
environment, branch), never mixed.

Commits are ordered parents first where the history holds both (a topological order of
the stored parent links), else by author date (then by when they were measured): a
rebased branch keeps its old author dates, so the parent links come first. A series has
one point per commit: when several runs of one series measured a cell at one commit, the
one measured last is shown and the point says how many there were.

Example:
    >>> commit_url("git@github.com:owner/repo.git", "abc123")
    'https://github.com/owner/repo/commit/abc123'
"""

from __future__ import annotations

import dataclasses
import datetime
import heapq
import re
import string
from collections.abc import Iterable, Mapping, Sequence

from ..api import InputError
from .archive import History
from .entry import CellPoint, Commit, Entry, Machine, Setup

MIN_FACTOR = 1.05  # the least change of level a time change point must make (asv's threshold)
SCP = re.compile(r"^(?:[\w.-]+@)?(?P<host>[\w.-]+):(?P<path>[^/].*)$")  # git@host:owner/repo
# the hosts a commit is linked to, by exact name (a history entry's remote is data from a
# results file: "github.com.evil.example" or "evilgithub.com" gets no link), and the
# path of a commit's page on each
COMMIT_PAGES = {
    "github.com": "commit",
    "gitlab.com": "-/commit",
    "bitbucket.org": "commits",
    "codeberg.org": "commit",
}
HEX_SHA = re.compile(r"[0-9a-f]{1,64}")  # what reaches the link is a sha, nothing else


def commit_url(remote: str | None, sha: str) -> str | None:
    """The web page of a commit on a recognised host (`COMMIT_PAGES`, matched exactly:
    github.com, gitlab.com, bitbucket.org, codeberg.org), from the https, ssh:// or
    ``git@host:`` form of the remote; else None."""
    if not remote or not HEX_SHA.fullmatch(sha or ""):
        return None
    match = SCP.match(remote)
    if match and "://" not in remote:
        host, path = match["host"], match["path"]
    else:
        found = re.match(
            r"^(?:https?|ssh|git)://(?:[^@/]+@)?(?P<host>[^/:]+)(?::\d+)?/(?P<path>.+)$", remote
        )
        if not found:
            return None
        host, path = found["host"], found["path"]
    path = path.strip("/").removesuffix(".git")
    if path.count("/") < 1 or not re.fullmatch(r"[\w.\-/]+", path):
        return None
    page = COMMIT_PAGES.get(host.lower())
    return f"https://{host.lower()}/{path}/{page}/{sha}" if page else None


def _timestamp(text: str | None) -> float | None:
    if not text:
        return None
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def order_commits(entries: Iterable[Entry]) -> tuple[Commit, ...]:
    """Every commit of the entries once, parents before children where both are stored,
    else oldest first (author date, else the first time it was measured, then sha).
    Commits whose stored parent links form a cycle (no git history does; an edited
    entry may) come last, oldest first."""
    commits: dict[str, Commit] = {}
    when: dict[str, float] = {}
    for entry in entries:
        sha = entry.commit.sha
        commits.setdefault(sha, entry.commit)
        moment = _timestamp(entry.commit.date) or _timestamp(entry.measured_at) or 0.0
        when[sha] = min(when.get(sha, moment), moment)
    children: dict[str, list[str]] = {sha: [] for sha in commits}
    waiting = dict.fromkeys(commits, 0)
    for sha, commit in commits.items():
        for parent in set(commit.parents):
            if parent in commits:
                children[parent].append(sha)
                waiting[sha] += 1
    ready = [(when[sha], sha) for sha, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    ordered = []
    while ready:
        _, sha = heapq.heappop(ready)
        ordered.append(commits[sha])
        for child in children[sha]:
            waiting[child] -= 1
            if waiting[child] == 0:
                heapq.heappush(ready, (when[child], child))
    placed = {commit.sha for commit in ordered}
    cycle = sorted((when[sha], sha) for sha in commits if sha not in placed)  # corrupt links
    return tuple(ordered) + tuple(commits[sha] for _, sha in cycle)


@dataclasses.dataclass(frozen=True)
class Line:
    """What one series keeps fixed: the machine, the environment, the branch. ``name``
    is its short name in legends (``A``, ``B``, ...)."""

    name: str
    machine: Machine
    setup: Setup
    branch: str | None

    @property
    def label(self) -> str:
        return f"{self.machine.label} · {self.setup.label} · {self.branch or 'no branch'}"

    @property
    def short(self) -> str:
        return f"{self.name}: {self.machine.name}, {self.setup.label}, {self.branch or '-'}"


@dataclasses.dataclass(frozen=True)
class Point:
    """One cell at one commit of one series."""

    position: int  # the commit's index in `Timeline.commits`
    commit: Commit
    cell: CellPoint
    runs: int = 1  # runs of this series that measured the cell at this commit


@dataclasses.dataclass(frozen=True)
class Series:
    cell: str
    line: Line
    points: tuple[Point, ...]


@dataclasses.dataclass(frozen=True)
class Timeline:
    """The whole history: commits in order, the lines, and per cell its series."""

    commits: tuple[Commit, ...]
    lines: tuple[Line, ...]
    cells: Mapping[str, tuple[Series, ...]]
    skipped: tuple[tuple[str, str], ...] = ()


def _line_key(entry: Entry) -> tuple:
    return (entry.machine.key, entry.setup, entry.branch)


def _names(count: int) -> list[str]:
    letters = string.ascii_uppercase
    return [
        letters[i] if i < 26 else f"{letters[i // 26 - 1]}{letters[i % 26]}" for i in range(count)
    ]


def timeline(history: History, branches: Sequence[str] = ()) -> Timeline:
    """The series of every cell (``branches``: only these branches' entries).

    Raises:
        InputError: a branch of ``branches`` has no run in the history (naming those it
            has).
    """
    known = sorted({e.branch for e in history.entries if e.branch is not None})
    unknown = [branch for branch in branches if branch not in known]
    if unknown:
        raise InputError(
            f"--branch {unknown[0]!r}: no run of the history is on this branch; its "
            f"branches: {', '.join(known) or 'none'}"
        )
    entries = [e for e in history.entries if not branches or e.branch in branches]
    commits = order_commits(entries)
    position = {commit.sha: index for index, commit in enumerate(commits)}
    keys = sorted(
        {_line_key(e) for e in entries}, key=lambda k: (str(k[2]), repr(k[0]), repr(k[1]))
    )
    first = {}
    for entry in entries:
        first.setdefault(_line_key(entry), entry)
    lines = {
        key: Line(name, first[key].machine, key[1], key[2])
        for name, key in zip(_names(len(keys)), keys, strict=True)
    }
    # (cell, line key) -> position -> [(measured_at, cell point)]
    found: dict[tuple[str, tuple], dict[int, list[tuple[str, CellPoint]]]] = {}
    for entry in entries:
        for cell in entry.cells:
            at = found.setdefault((cell.label, _line_key(entry)), {})
            at.setdefault(position[entry.commit.sha], []).append((entry.measured_at or "", cell))
    cells: dict[str, list[Series]] = {}
    for (label, key), by_position in found.items():
        points = tuple(
            Point(where, commits[where], max(runs, key=lambda run: run[0])[1], len(runs))
            for where, runs in sorted(by_position.items())
        )
        cells.setdefault(label, []).append(Series(label, lines[key], points))
    ordered = {
        label: tuple(sorted(series, key=lambda s: s.line.name))
        for label, series in sorted(cells.items())
    }
    return Timeline(commits, tuple(lines[k] for k in keys), ordered, history.skipped)

"""Two sides interleaved in randomized blocks in one job: baseline vs candidate
(`scanbench gate --against REV` and its self-calibration `--aa`), and the two backends of
an invariant (`invariants`).

On a shared machine the speed drifts by 0.3x-3x between moments, so the two sides are
measured alternately: per block, each side's warm worker takes a few timed calls, in an
order drawn from a seeded generator. Each block gives a paired ratio; `scanbench.gate.decide`
decides from those (`paired_decision`, `invariant_finding`), and a suspect cell or a
failing invariant is re-measured in fresh processes before it fails.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import select
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from ..api import HarnessError, InputError
from ..import_path import import_root, with_import_root
from ..sources import resolve
from .decide import (
    BaselineFinding,
    Kind,
    Outcome,
    PairedDecision,
    Verdict,
    baseline_verdict,
    invariant_finding,
    invariant_verdict,
    paired_decision,
)
from .explain import Difference, Facts, differences
from .rules import BaselineRule, Invariant, Settings

SIDES = ("baseline", "candidate")
SERVE = Path(__file__).resolve().parent / "serve.py"


def schedule(blocks: int, seed: int) -> list[tuple[str, str]]:
    """The order of the two sides in each block: a seeded coin flip per block."""
    rng = np.random.default_rng(seed)
    return [SIDES if flip else SIDES[::-1] for flip in rng.integers(0, 2, size=blocks)]


def interleaved_blocks(
    samplers: Mapping[str, Callable[[int], list[float]]],
    blocks: int,
    per_block: int | Mapping[str, int],
    seed: int,
) -> dict[str, list[list[float]]]:
    """Run ``samplers[side](per_block)`` for both sides in every block, in `schedule`
    order; ``per_block`` may differ per side (``{side: calls}``)."""
    counts = per_block if isinstance(per_block, Mapping) else dict.fromkeys(SIDES, per_block)
    out: dict[str, list[list[float]]] = {side: [] for side in SIDES}
    for order in schedule(blocks, seed):
        for side in order:
            out[side].append(list(samplers[side](counts[side])))
    return out


def project_root(start: Path | None = None) -> Path:
    """The project a gate or a comparison measures: the git work tree of the directory
    scanbench runs in (its import root, `scanbench.import_path`), else that directory."""
    start = Path(start or import_root())
    command = ["git", "-C", str(start), "rev-parse", "--show-toplevel"]  # git from PATH
    done = subprocess.run(command, capture_output=True, text=True)  # noqa: S603 (fixed arguments)
    return Path(done.stdout.strip()).resolve() if done.returncode == 0 else start.resolve()


@dataclasses.dataclass(frozen=True)
class Side:
    """Where a side's code lives (its tree: imported from there first, its scenario files
    read there), the interpreter and extra environment variables it runs with (`scanbench
    compare`: same code, another jax or XLA_FLAGS), and the test-only slowdown factor
    applied to it. ``home`` is the tree the rules' file sources are written against (the
    checkout the command runs in): a baseline worktree reads the same relative paths in
    its own tree."""

    root: Path
    slowdown: float = 1.0
    python: str | None = None  # None: this interpreter
    environ: Mapping[str, str] = dataclasses.field(default_factory=dict)
    home: Path | None = None  # None: the side's own root

    def source(self, source: str) -> str:
        """``source`` as this side reads it: a file inside `home` from the same place in
        this side's tree; module sources are imported from the tree anyway."""
        target, colon, attribute = source.rpartition(":")
        home = (self.home or self.root).resolve()
        path = Path(target)
        if not target.endswith(".py") or not path.is_absolute() or not path.is_relative_to(home):
            return source
        return f"{self.root / path.relative_to(home)}{colon}{attribute}"


def worker_cpus(pin: bool) -> list[int] | None:
    """The CPU both sides' workers are pinned to (the last one this process may use), or
    None. One CPU for both: XLA:CPU's intra-op threads otherwise make a call's time
    bimodal (both cores or one, seen 28 ms vs 46 ms for the same call), and two CPUs of a
    shared VM drift apart in speed."""
    if not pin or not hasattr(os, "sched_getaffinity"):
        return None
    return [max(os.sched_getaffinity(0))]


class ServedCell:
    """A `scanbench.gate.serve` worker for one cell of one side (a context manager).

    The worker imports the side's tree first (`scanbench.import_path`); it reports where
    the scenario's modules came from, and a side that imported a module from ``others``
    (the other side's tree: an installed copy ahead of its own, say) is refused with the
    module named: it would not measure its own code."""

    def __init__(
        self,
        rule: BaselineRule,
        side: Side,
        timeout_s: float,
        cpus: list[int] | None = None,
        others: Sequence[Path] = (),
    ):
        spec = {
            "source": side.source(resolve(rule.scenario)),
            "scenario": rule.scenario,
            "backend": rule.backend,
            "size": rule.size,
            "dtype": rule.dtype,  # None: the scenario's default
            "slowdown": side.slowdown,
            "cpus": cpus,
        }
        env = {
            **with_import_root({**os.environ, **side.environ}, side.root),
            "PYTHONUNBUFFERED": "1",
        }
        self.label, self.root, self.timeout_s = rule.label, side.root, timeout_s
        # stderr to a file: a pipe nobody reads could fill up and block the worker
        self.stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed in close())
        self.process = subprocess.Popen(  # noqa: S603 (the side's interpreter, our own server)
            [side.python or sys.executable, str(SERVE), str(side.root), json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            cwd=side.root,
            env=env,
        )
        ready = self._reply()
        self.call_s = float(ready.get("call_s", 0.0))  # one warm call, timed
        self.versions = dict(ready.get("versions") or {})  # jax, jaxlib, python of the side
        self.imported = dict(ready.get("imported") or {})  # module -> file it came from
        for module, location in self.imported.items():
            foreign = [other for other in others if Path(location).is_relative_to(other)]
            if foreign:
                self.close()
                raise HarnessError(
                    f"{self.label}: the side at {side.root} imported {module} from "
                    f"{location}, in the other side's tree ({foreign[0]}), so it would not "
                    "measure its own code (an installed copy or a PYTHONPATH entry ahead of "
                    "its tree?); make the package importable from each tree's root, e.g. "
                    "PYTHONPATH=src with a relative entry, which each side reads in its tree"
                )

    def explain(self) -> tuple[Facts | None, str]:
        """The side's facts (`scanbench.gate.explain`), measured after its timed blocks;
        (None, why) when they cannot be had."""
        self.process.stdin.write(json.dumps({"explain": True}) + "\n")
        self.process.stdin.flush()
        try:
            reply = self._reply()
        except HarnessError as error:
            return None, str(error)
        if "facts" not in reply:
            return None, str(reply.get("facts_error", "no facts"))
        return Facts.from_json(reply["facts"]), ""

    def _reply(self) -> dict:
        readable, _, _ = select.select([self.process.stdout], [], [], self.timeout_s)
        if not readable:
            self.process.kill()
            raise HarnessError(f"{self.label} ({self.root}): no answer within {self.timeout_s:g} s")
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(timeout=self.timeout_s)
            self.stderr.seek(0)
            tail = self.stderr.read()[-2000:]
            raise HarnessError(f"{self.label} ({self.root}): worker died: {tail}")
        reply = json.loads(line)
        if "error" in reply:
            raise HarnessError(f"{self.label} ({self.root}): {reply['error']}")
        return reply

    def samples(self, count: int) -> list[float]:
        self.process.stdin.write(json.dumps({"samples": count}) + "\n")
        self.process.stdin.flush()
        return self._reply()["samples"]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.stderr.close()

    def __enter__(self) -> ServedCell:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def samples_per_block(settings: Settings, call_s: float) -> int:
    """Calls per side and block: at least ``samples_per_block``, and enough to fill
    ``block_time_s`` (a block median of 5 calls of 0.3 ms is too noisy to see 10%)."""
    wanted = settings.block_time_s / call_s if call_s > 0 else 0.0
    return max(int(settings.samples_per_block), min(int(np.ceil(wanted)), 10_000))


def _round_robin(workers: Sequence[ServedCell]) -> Callable[[int], list[float]]:
    """A sampler whose n-th call is served by worker n mod len(workers)."""
    calls = iter(range(10**12))
    return lambda count: workers[next(calls) % len(workers)].samples(count)


@dataclasses.dataclass(frozen=True)
class Blocks:
    """What one interleaved measurement of a cell gave: the blocks of each side, each
    side's versions as its worker reported them, and, when asked, each side's facts
    (`scanbench.gate.explain`, measured after the blocks) or why there are none."""

    blocks: Mapping[str, list[list[float]]]
    versions: Mapping[str, Mapping[str, str]]
    facts: Mapping[str, Facts | None] = dataclasses.field(default_factory=dict)
    facts_errors: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def differences(self) -> tuple[Difference, ...] | None:
        """What differs between the two sides' facts; None when either has none."""
        baseline, candidate = (self.facts.get(side) for side in SIDES)
        if baseline is None or candidate is None:
            return None
        return differences(baseline, candidate)


def measure_blocks(
    rule: BaselineRule,
    sides: Mapping[str, Side],
    settings: Settings,
    seed: int,
    timeout_s: float,
    explain: bool = False,
) -> Blocks:
    """`measure_cells` of one cell on both sides, with the rule's own worker pairs and
    blocks; both sides take as many calls per block as the baseline's warm call needs to
    fill ``block_time_s``."""
    cells = dict.fromkeys(SIDES, rule)
    return measure_cells(cells, sides, rule.settings(settings), seed, timeout_s, explain)


def measure_cells(
    cells: Mapping[str, BaselineRule],
    sides: Mapping[str, Side],
    settings: Settings,
    seed: int,
    timeout_s: float,
    explain: bool = False,
    own_block_sizes: bool = False,
) -> Blocks:
    """Fresh workers for both sides (``cells[side]`` in ``sides[side]``), interleaved
    blocks, then (``explain``) each side's facts from its first worker.

    With ``worker_pairs`` = k, each side runs k workers, started in alternating order
    (baseline first for even pairs, candidate first for odd ones), and block b is taken
    by pair b mod k: a per-process speed offset (one process a few percent faster than
    an identical one, seen up to 8% between JAX workers) averages out instead of
    deciding the comparison. Each side takes, per block, enough calls to fill
    ``block_time_s`` at the baseline's warm call time, or at its own with
    ``own_block_sizes`` (two different cells: an invariant)."""
    cpus = worker_cpus(settings.pin_workers)
    pairs = settings.worker_pairs
    roots = {side: Path(sides[side].root).resolve() for side in SIDES}
    with contextlib.ExitStack() as stack:
        workers: dict[str, list[ServedCell]] = {side: [] for side in SIDES}
        for pair in range(pairs):
            for side in SIDES if pair % 2 == 0 else SIDES[::-1]:
                others = [root for name, root in roots.items() if root != roots[side]]
                worker = ServedCell(cells[side], sides[side], timeout_s, cpus, others)
                workers[side].append(stack.enter_context(worker))
        sized = {side: side if own_block_sizes else "baseline" for side in SIDES}
        per_block = {
            side: samples_per_block(settings, workers[sized[side]][0].call_s) for side in SIDES
        }
        blocks = interleaved_blocks(
            {side: _round_robin(workers[side]) for side in SIDES}, settings.blocks, per_block, seed
        )
        facts, errors = {}, {}
        for side in SIDES if explain else ():
            facts[side], why = workers[side][0].explain()
            if why:
                errors[side] = why
    versions = {side: workers[side][0].versions for side in SIDES}
    return Blocks(blocks, versions, facts, errors)


def measure_pair(
    rule: BaselineRule,
    sides: Mapping[str, Side],
    settings: Settings,
    seed: int,
    timeout_s: float,
    explain: bool = False,
) -> tuple[PairedDecision, Blocks]:
    """`measure_blocks`, then one paired decision."""
    measured = measure_blocks(rule, sides, settings, seed, timeout_s, explain)
    decision = paired_decision(
        measured.blocks["baseline"],
        measured.blocks["candidate"],
        rule.delta,
        rule.floor_s,
        rule.settings(settings).confidence,
    )
    return decision, measured


def compare(
    rules: Sequence[BaselineRule],
    sides: Mapping[str, Side],
    settings: Settings,
    timeout_s: float = 900.0,
    seed_offset: int = 0,
    explain: bool = False,
) -> list[Verdict]:
    """One verdict per rule: fail only when the interleaved measurement and a confirming
    re-run in fresh processes are both suspect. With ``explain``, each verdict carries
    what differs between the two sides (`scanbench.gate.explain`) as the first
    measurement's workers found it."""
    verdicts = []
    for index, rule in enumerate(rules):
        seed = settings.seed + 1000 * seed_offset + 2 * index
        first, measured = measure_pair(rule, sides, settings, seed, timeout_s, explain)
        measurements = (first,)
        if first.suspect:
            measurements += (measure_pair(rule, sides, settings, seed + 1, timeout_s)[0],)
        finding = BaselineFinding(rule.delta, rule.floor_s, settings.confidence, measurements)
        verdict = baseline_verdict(rule.label, finding)
        if explain:
            why = "; ".join(f"{side}: {error}" for side, error in measured.facts_errors.items())
            verdict = dataclasses.replace(
                verdict, differences=measured.differences(), explain_error=why
            )
        verdicts.append(verdict)
    return verdicts


def invariants(
    rules: Sequence[Invariant], root: Path, settings: Settings, timeout_s: float = 900.0
) -> list[Verdict]:
    """One verdict per invariant: its two backends (the code under ``root``) interleaved
    in blocks, each taking enough calls per block to fill ``block_time_s``, decided on the
    per-block ratios slower / faster (`scanbench.gate.decide.invariant_finding`); a
    failing measurement is re-measured in fresh processes and fails only if it fails
    again. A cell that cannot be measured (a wrong output, a crash) fails its rule."""
    side = Side(root, home=root)
    verdicts = []
    for index, rule in enumerate(rules):
        own = rule.settings(settings)
        seed = settings.seed + 2 * index
        findings = []
        try:
            for attempt in range(2):
                sides = dict.fromkeys(SIDES, side)
                cells, attempt_seed = rule.cells(), seed + attempt
                blocks = measure_cells(
                    cells, sides, own, attempt_seed, timeout_s, own_block_sizes=True
                ).blocks
                finding = invariant_finding(
                    rule, blocks["candidate"], blocks["baseline"], own.confidence
                )
                findings.append(finding)
                if finding.outcome != Outcome.FAIL:
                    break
        except HarnessError as error:
            verdicts.append(Verdict(Kind.INVARIANT, rule.label, Outcome.FAIL, reason=str(error)))
            continue
        verdicts.append(invariant_verdict(rule.label, findings))
    return verdicts


@contextlib.contextmanager
def worktree(revision: str, repository: Path) -> Iterator[Path]:
    """A temporary git worktree of ``revision`` of ``repository`` (the project the gate
    runs in: `project_root`)."""

    def git(*args: str) -> subprocess.CompletedProcess:
        command = ["git", *args]  # git from PATH, as the user's shell finds it
        return subprocess.run(command, cwd=repository, capture_output=True, text=True)  # noqa: S603

    # the user's revision after --end-of-options: one spelled like an option is a revision
    resolved = git("rev-parse", "--verify", "--end-of-options", f"{revision}^{{commit}}")
    if resolved.returncode != 0:
        raise InputError(f"--against {revision!r}: not a commit of {repository}")
    with tempfile.TemporaryDirectory(prefix="scanbench-baseline-") as tmp:
        path = Path(tmp) / "baseline"
        sha = resolved.stdout.strip()
        added = git("worktree", "add", "--detach", "--end-of-options", str(path), sha)
        if added.returncode != 0:
            raise HarnessError(f"git worktree add failed: {added.stderr.strip()}")
        try:
            yield path
        finally:
            git("worktree", "remove", "--force", str(path))

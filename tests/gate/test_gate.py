"""The regression gate: exact count rules that name the culprit, invariants and baseline
comparisons decided on exact intervals of interleaved per-block ratios, the seeded
interleaving scheduler, A/A and planted slowdowns."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import numpy as np
import pytest
import tomli_w

from scanbench.api import InputError, UnknownNameError
from scanbench.cli.main import main
from scanbench.gate.calibration import summary
from scanbench.gate.command import calibrate
from scanbench.gate.decide import (
    check_counts,
    count_expectation,
    invariant_finding,
    invariant_verdict,
    paired_decision,
)
from scanbench.gate.interleave import SIDES, interleaved_blocks, schedule
from scanbench.gate.render import calibration_markdown, describe, markdown
from scanbench.gate.rules import Invariant, load_count_rules, load_gates
from scanbench.results import load_run, write_run
from tests.support.paths import DATA, SCENARIO_FILES

TOY = str(SCENARIO_FILES / "toy.py")


def tdma_record(backend: str, size: str = "smoke"):
    run = load_run(DATA / "tdma.json")
    return next(r for r in run.records if r.backend == backend and r.size == size)


def write_counts(path: Path, *records) -> None:
    path.write_text(tomli_w.dumps({"count": [count_expectation(r) for r in records]}))


def grown(record, function="jit(_forward_column)", op=None):
    """The record with one more dispatch of ``function`` (and one more kernel ``op``)."""
    counts = copy.deepcopy(record.counts.to_json())
    trace = counts["trace"]
    trace["dispatches"] += 1
    trace["dispatches_by_function"][function] = trace["dispatches_by_function"].get(function, 0) + 1
    if op:
        trace["kernels"] += 1
        trace["kernels_by_op"][op] = trace["kernels_by_op"].get(op, 0) + 1
    return dataclasses.replace(record, counts=counts)


def test_count_rules_pass_unchanged_and_name_the_culprit_of_an_increase(tmp_path):
    record = tdma_record("sequential-jax")
    write_counts(tmp_path / "counts.toml", record)
    (rule,) = load_count_rules(tmp_path / "counts.toml")
    assert rule.limits["dispatches"] == 202 and rule.limits["h2d"] == 1
    assert rule.dispatches_by_function["jit(_forward_column)"] == 100
    (ok,) = check_counts([rule], [record])
    assert ok.outcome == "pass"
    (bad,) = check_counts([rule], [grown(record, op="jit_new/extra_fusion")])
    assert bad.outcome == "fail"
    text = describe(bad)
    assert (
        "1 dispatch more per call than expected (dispatches 202 -> 203), in "
        "jit(_forward_column) 100 -> 101" in text
    )
    assert (
        "1 kernel more per call than expected (kernels 502 -> 503), in jit_new/extra_fusion" in text
    )


def test_count_rules_scale_counts_taken_on_a_smaller_size(tmp_path):
    record = tdma_record("scanned-time-major")
    (rule,) = load_count_rules_from(record, tmp_path)
    counts = copy.deepcopy(record.counts.to_json())
    counts["scale"] = 2.0  # counted on half the work: per call, everything doubles
    (verdict,) = check_counts([rule], [dataclasses.replace(record, counts=counts)])
    assert verdict.outcome == "fail" and "(dispatches 1 -> 2)" in describe(verdict)


def load_count_rules_from(record, tmp: Path):
    path = tmp / f"counts-{record.backend}.toml"
    write_counts(path, record)
    return load_count_rules(path)


def test_fewer_counts_pass_and_say_so(tmp_path):
    record = tdma_record("sequential-jax")
    (rule,) = load_count_rules_from(grown(record), tmp_path)
    (verdict,) = check_counts([rule], [record])
    assert verdict.outcome == "pass" and "fewer than expected: dispatches 203 -> 202" in describe(
        verdict
    )


def test_a_failed_or_missing_cell_fails_its_count_rule(tmp_path):
    record = tdma_record("sequential-jax")
    (rule,) = load_count_rules_from(record, tmp_path)
    failed = dataclasses.replace(record, status="failed", error="MismatchError: off")
    assert describe(check_counts([rule], [failed])[0]) == "cell failed: MismatchError: off"
    assert check_counts([rule], [])[0].outcome == "fail"


INVARIANT = Invariant("s", "smoke", faster="fast", slower="slow", factor=2.0)


def paired_blocks(ratio: float, spread: float, blocks: int = 40, seed: int = 1):
    """Interleaved blocks of a fast cell and one ``ratio`` x slower, with a drift both
    share (the machine) and per-call noise of ``spread``."""
    rng = np.random.default_rng(seed)
    drift = 1 + np.linspace(0, 2, blocks)  # the machine slows 3x over the run
    fast = [list(1e-3 * d * (1 + spread * rng.standard_normal(5))) for d in drift]
    slow = [list(ratio * 1e-3 * d * (1 + spread * rng.standard_normal(5))) for d in drift]
    return slow, fast


@pytest.mark.parametrize(
    ("ratio", "spread", "outcome"),
    [(3.0, 0.02, "pass"), (1.2, 0.02, "fail"), (2.0, 0.5, "inconclusive")],
)
def test_invariant_decides_on_the_interval_of_the_per_block_ratios(ratio, spread, outcome):
    slow, fast = paired_blocks(ratio, spread)
    finding = invariant_finding(INVARIANT, slow, fast, confidence=0.99)
    assert finding.outcome == outcome, finding
    assert finding.blocks == 40 and finding.slower_samples == finding.faster_samples == 200
    # the interval is the order-statistic one of the per-block ratios, drift cancelled
    ratios = sorted(np.median(s) / np.median(f) for s, f in zip(slow, fast, strict=True))
    assert (finding.low, finding.high) == (ratios[11], ratios[28])  # 99%, 40 blocks


def test_an_invariant_fails_only_when_its_re_run_fails_too():
    failing = invariant_finding(INVARIANT, *paired_blocks(1.2, 0.02), 0.99)
    passing = invariant_finding(INVARIANT, *paired_blocks(3.0, 0.02), 0.99)
    assert invariant_verdict("r", [failing, failing]).outcome == "fail"
    disagree = invariant_verdict("r", [failing, passing])
    assert disagree.outcome == "inconclusive" and disagree.ratios == (failing, passing)
    text = describe(disagree)
    assert "40 interleaved blocks" in text and "confirming re-run" in text, text
    assert invariant_verdict("r", [passing]).outcome == "pass"


def test_within_invariant_is_an_upper_bound():
    within = Invariant("s", "smoke", faster="fast", slower="slow", within=1.5)
    assert invariant_finding(within, *paired_blocks(1.2, 0.02), 0.99).outcome == "pass"
    assert invariant_finding(within, *paired_blocks(2.0, 0.02), 0.99).outcome == "fail"


def test_the_added_time_is_paired_as_the_ratios_are():
    """The floor is checked on the median of the per-block differences, paired as the
    ratios are (the two sides' pooled medians are not: on this VM they once read -11 us
    for a planted slowdown whose per-block differences were +19 us)."""
    rng = np.random.default_rng(8)
    speed = rng.choice([1.0, 3.0], size=40)  # each block on a fast or a slow machine
    base = [list(1e-3 * s * (1 + 0.01 * rng.standard_normal(5))) for s in speed]
    cand = [list(1.05e-3 * s * (1 + 0.01 * rng.standard_normal(5))) for s in speed]
    decision = paired_decision(base, cand, 0.01, 2e-6, 0.99)
    per_block = [np.median(c) - np.median(b) for b, c in zip(base, cand, strict=True)]
    assert decision.difference_s == pytest.approx(np.median(per_block))
    assert decision.suspect and decision.ratio == pytest.approx(1.05, abs=0.01)


def test_too_few_blocks_decide_nothing():
    """7 blocks give a one-sided 99% bound but no two-sided one: the invariant stays
    inconclusive, however far from its threshold."""
    finding = invariant_finding(INVARIANT, *paired_blocks(3.0, 0.0, blocks=7), 0.99)
    assert finding.outcome == "inconclusive" and finding.low == -np.inf
    slow, fast = paired_blocks(3.0, 0.0, blocks=6)
    decision = paired_decision(fast, slow, 0.05, 0.0, 0.99)
    assert decision.low == -np.inf and not decision.suspect and decision.detectable == np.inf


def test_scheduler_alternates_both_sides_in_seeded_random_order():
    order = schedule(200, seed=7)
    assert all(sorted(block) == sorted(SIDES) for block in order)
    firsts = [block[0] for block in order]
    assert 60 < firsts.count("baseline") < 140  # randomized, not alternating by rule
    assert order == schedule(200, seed=7) and order != schedule(200, seed=8)
    calls = []
    blocks = interleaved_blocks(
        {side: (lambda k, side=side: calls.append(side) or [1.0] * k) for side in SIDES},
        blocks=20,
        per_block=3,
        seed=7,
    )
    assert [side for block in schedule(20, 7) for side in block] == calls
    assert all(len(b) == 20 and all(len(s) == 3 for s in b) for b in blocks.values())


class DriftingClock:
    """A deterministic fake backend on a machine that slows down 3x over the run."""

    def __init__(self, cost: float) -> None:
        self.cost, self.calls = cost, 0

    def samples(self, count: int) -> list[float]:
        out = []
        for _ in range(count):
            self.calls += 1
            out.append(self.cost * (1 + self.calls / 100))
        return out


def test_aa_on_a_deterministic_fake_backend_never_fails():
    for seed in range(20):
        machine = DriftingClock(1e-3)  # both sides share the machine and its drift
        blocks = interleaved_blocks(
            {side: machine.samples for side in SIDES}, blocks=20, per_block=5, seed=seed
        )
        decision = paired_decision(blocks["baseline"], blocks["candidate"], 0.10, 10e-6, 0.99)
        assert not decision.suspect and 0.9 < decision.ratio < 1.1


def test_a_slowdown_of_one_side_is_suspect():
    base, cand = DriftingClock(1e-3), DriftingClock(1.3e-3)
    blocks = interleaved_blocks(
        {"baseline": base.samples, "candidate": cand.samples}, blocks=20, per_block=5, seed=0
    )
    decision = paired_decision(blocks["baseline"], blocks["candidate"], 0.10, 10e-6, 0.99)
    assert decision.suspect and decision.low > 1.1
    # the lower bound is the 5th smallest of the 20 per-block ratios (one-sided 99%)
    ratios = sorted(
        np.median(c) / np.median(b)
        for b, c in zip(blocks["baseline"], blocks["candidate"], strict=True)
    )
    assert decision.low == ratios[4] and decision.blocks == 20
    # the same slowdown below the absolute floor is not
    below = paired_decision(blocks["baseline"], blocks["candidate"], 0.10, 1.0, 0.99)
    assert not below.suspect


def toy_gates(tmp_path: Path, **settings) -> Path:
    gates = {
        "settings": {"blocks": 8, "samples_per_block": 5, "floor_s": 0.0, **settings},
        # ~1 ms calls: a microsecond call is dominated by per-process noise under load
        "baseline": [{"scenario": f"{TOY}:SCENARIO", "backend": "good", "size": "large"}],
    }
    path = tmp_path / "gates.toml"
    path.write_text(tomli_w.dumps(gates))
    return path


@pytest.mark.solo  # its A/A ratio compares times: the other test worker's load skews it
def test_real_workers_detect_a_planted_3x_slowdown_and_pass_aa(tmp_path):
    gates = load_gates(toy_gates(tmp_path))
    calibration = calibrate(gates, repetitions=1, slowdown=3.0, timeout_s=120)
    assert calibration.detecting_repetitions == 1
    ((verdict,),) = calibration.slowed
    assert "confirming re-run" in describe(verdict)
    # the candidate really ran slower: the paired ratio is measured, not multiplied in
    assert all(m.ratio > 1.5 for m in verdict.baseline.measurements), describe(verdict)
    text = calibration_markdown(calibration)
    assert calibration.failing_repetitions == 0, text
    assert "false alarms (identical code on both sides): **0 of 1**" in text
    assert "detections of a planted 3x slowdown: **1 of 1**" in text
    (row,) = summary(calibration.to_json())
    assert (row.false_alarms, row.caught, row.repetitions) == (0, 1, 1)
    assert row.slowed_ratio > 1.5 and 0.8 < row.aa_ratio < 1.25


def test_the_calibration_table_is_drawn_from_its_stored_form():
    from scanbench.gate.calibration import Calibration, table
    from scanbench.gate.decide import BaselineFinding, Kind, Outcome, PairedDecision, Verdict

    def verdict(ratio, low, detectable, confirmed):
        first = PairedDecision(ratio, low, 1e-5, low > 1.02, detectable, 40)
        again = (first,) if confirmed else ()
        finding = BaselineFinding(0.02, 1e-5, 0.99, (first, *again))
        outcome = Outcome.FAIL if confirmed and first.suspect else Outcome.PASS
        return Verdict(Kind.BASELINE, "t/b/smoke", outcome, baseline=finding)

    same = tuple((verdict(1.0 + i / 100, 0.99, 1.03 + i / 100, False),) for i in range(10))
    slow = tuple((verdict(1.05, 1.04 - (i == 0) / 10, 1.0, True),) for i in range(10))
    data = Calibration(10, 1.05, same, slow).to_json()
    (row,) = summary(data)
    assert (row.false_alarms, row.suspect_first, row.caught) == (0, 0, 9)
    assert row.aa_ratio == pytest.approx(1.045) and row.slowed_ratio == 1.05
    assert row.detectable_median == pytest.approx(1.075)
    assert row.detectable_p90 == pytest.approx(
        np.percentile([1.03 + i / 100 for i in range(10)], 90)
    )
    text = table(data)
    assert "| t/b/smoke | 0.02 | 0 of 10 | 0 of 10 | 1.045x | 9 of 10 | 1.050x |" in text
    # each rule's worker pairs: its own, else the settings'
    from scanbench.gate.calibration import worker_pairs
    from scanbench.gate.rules import BaselineRule

    rules = [BaselineRule("t", "b", "smoke", 0.02, 1e-5),
             BaselineRule("t", "c", "smoke", 0.02, 1e-5, worker_pairs=4)]  # fmt: skip
    pairs = worker_pairs(rules, default=2)
    assert pairs == {"t/b/smoke": 2, "t/c/smoke": 4}
    assert "| rule | delta | worker pairs | A/A false alarms |" in table(data, pairs)
    assert "| t/b/smoke | 0.02 | 2 | 0 of 10 |" in table(data, pairs)


def test_a_planted_slowdown_is_extra_work_sized_to_what_it_realizes(monkeypatch):
    """`serve.slowed`: after each call (waited for), busy iterations; first guessed from
    the call's CPU time, then rescaled until blocks of slowed calls take F x as long as
    blocks of plain ones (here each iteration costs twice the wall time the CPU-time
    guess assumed, so the work is halved)."""
    from scanbench.gate import serve

    done = []

    class Timing:
        def sample(self, run, prepared, count, clock=None, before=None):
            done.clear()
            run(prepared)  # a slowed call runs its busy loop once
            extra = done[-1] * 2e-8 if done else 0.0  # 20 ns of wall time per iteration
            return [1e-3 + extra] * count  # a 1 ms call

        def call_and_wait(self, run, prepared):
            return run(prepared)

    monkeypatch.setattr(serve, "busy", done.append)
    monkeypatch.setattr(serve, "busy_iterations", lambda seconds: round(seconds / 1e-8))
    run = serve.slowed(lambda x: 2 * x, 21, 1.05, Timing())
    done.clear()
    assert run(21) == 42 and done == [2500]  # 0.05 x 1 ms at 20 ns per iteration
    assert serve.slowed(len, None, 1.0, Timing()) is len


def test_busy_work_is_counted_in_iterations():
    from scanbench.gate import serve

    assert serve.busy(5) == 1
    ticks = iter(range(10**6))
    # every timing reads 3 ms: 1,000 iterations -> 2 ms wanted -> 667 -> 445 -> 297
    assert serve.busy_iterations(2e-3, clock=lambda: next(ticks) * 3e-3) == 297


def test_invariants_are_measured_interleaved_in_fresh_workers(tmp_path):
    """A cell whose result is ready 50 ms after its 1 ms of work, against the 1 ms cell
    alone, interleaved: per-block ratios of about 50; a wrong cell fails its rule with
    the check's message, and a --results run is not what decides an invariant. 12 blocks:
    at 8, the fewest for 99%, the interval of the median ratio is the blocks' range, and
    one block of a VM's slow phase at 2.6x made the rule inconclusive (2026-12-02)."""
    invariant = {"scenario": f"{TOY}:SCENARIO", "size": "large", "faster": "good"}
    gates = {
        "settings": {"blocks": 12, "samples_per_block": 3, "block_time_s": 0.0},
        "invariant": [
            {**invariant, "slower": "delayed", "factor": 5.0, "worker_pairs": 1},
            {**invariant, "slower": "delayed", "within": 5.0, "worker_pairs": 1},
            {**invariant, "slower": "wrong", "factor": 1.0, "worker_pairs": 1},
        ],
    }
    path = tmp_path / "gates.toml"
    path.write_text(tomli_w.dumps(gates))
    md = tmp_path / "gate.md"
    assert main(["gate", "--gates", str(path), "--md", str(md)]) == 1
    rows = {line.split(" | ")[2]: line for line in md.read_text().splitlines() if "|" in line}
    factor = rows["toy/large: good >= 5x faster than delayed"]
    assert factor.startswith("| pass |"), factor
    assert "(12 interleaved blocks, 36 and 36 samples)" in factor, factor
    within = rows["toy/large: delayed within 5x of good"]
    assert within.startswith("| fail |") and "confirming re-run" in within, within
    wrong = rows["toy/large: good >= 1x faster than wrong"]
    assert wrong.startswith("| fail |") and "MismatchError" in wrong, wrong


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("[settings]\nblokcs = 3\n", UnknownNameError, "unknown key 'blokcs'"),
        ("[settings]\nblocks = 'many'\n", InputError, "'blocks' must be int, got str"),
        ("[[invariant]]\nscenario = 'x'\n", InputError, "missing key 'size'"),
        ("[settings]\nconfidence = 1.5\n", InputError, "confidence must be in (0.5, 1)"),
        (
            "[[invariant]]\nscenario='a'\nsize='smoke'\nfaster='x'\nslower='y'\n",
            InputError,
            "give exactly one of 'factor' (at least) or 'within' (at most)",
        ),
        ("[settings\n", InputError, "not valid TOML"),
        (
            "[settings]\nblocks = 5\n",
            InputError,
            "[settings] blocks = 5: too few blocks to bound a median ratio at confidence "
            "0.99; give at least 8",
        ),
    ],
)
def test_gate_file_errors_name_the_field(tmp_path, text, error, message):
    path = tmp_path / "gates.toml"
    path.write_text(text)
    with pytest.raises(error, match=None) as info:
        load_gates(path)
    assert message in str(info.value) and str(path) in str(info.value)


def test_cli_exit_codes_and_markdown(tmp_path, capsys):
    record = tdma_record("sequential-jax")
    (tmp_path / "gates.toml").write_text("")
    write_counts(tmp_path / "counts.toml", record)
    run = load_run(DATA / "tdma.json")
    write_run(tmp_path / "same.json", run)
    gates = str(tmp_path / "gates.toml")
    assert main(["gate", "--gates", gates, "--results", str(tmp_path / "same.json")]) == 0
    records = tuple(grown(r) if r == record else r for r in run.records)
    write_run(tmp_path / "grown.json", dataclasses.replace(run, records=records))
    md = tmp_path / "gate.md"
    args = ["gate", "--gates", gates, "--results", str(tmp_path / "grown.json"), "--md", str(md)]
    assert main(args) == 1
    text = md.read_text()
    assert (
        text.startswith("## scanbench gate: FAILED") and "jit(_forward_column) 100 -> 101" in text
    )
    assert main(["gate", "--gates", str(tmp_path / "missing.toml")]) == 2
    assert "cannot read gate file" in capsys.readouterr().err
    assert main(["gate", "--gates", gates, "--inject-slowdown", "2"]) == 2
    assert main(["gate", "--gates", gates, "--aa", "1", "--inject-slowdown", "0.5"]) == 2
    assert "--inject-slowdown must be >= 1" in capsys.readouterr().err
    assert main(["gate", "--gates", gates, "--json", str(tmp_path / "c.json")]) == 2
    assert "--json only works with --aa" in capsys.readouterr().err


def test_markdown_lists_failures_first():
    from scanbench.gate.decide import Kind, Outcome, Verdict

    ok = Verdict(Kind.COUNT, "a", Outcome.PASS, reason="ok")
    text = markdown([ok, Verdict(Kind.INVARIANT, "b", Outcome.FAIL, reason="x|y")])
    lines = text.splitlines()
    assert lines[0] == "## scanbench gate: FAILED" and "2 rules: 1 failed" in text
    assert lines[6] == "| fail | invariant | b | x\\|y |"


def test_against_head_builds_a_worktree_and_compares(tmp_path):
    gates = {
        "settings": {"blocks": 8, "samples_per_block": 3},
        "baseline": [{"scenario": "tridiagonal", "backend": "numba-serial", "size": "smoke"}],
    }
    path = tmp_path / "gates.toml"
    path.write_text(tomli_w.dumps(gates))
    md = tmp_path / "against.md"
    code = main(["gate", "--gates", str(path), "--against", "HEAD", "--md", str(md)])
    text = md.read_text()
    assert code in (0, 1) and "tridiagonal/numba-serial/smoke" in text
    assert "candidate/baseline" in text and "lower bound" in text
    assert main(["gate", "--gates", str(path), "--against", "no-such-rev"]) == 2


def test_counts_file_round_trip_keeps_breakdowns(tmp_path):
    record = tdma_record("scanned-issue")
    write_counts(tmp_path / "c.toml", record)
    (rule,) = load_count_rules(tmp_path / "c.toml")
    expected = count_expectation(record)
    assert rule.kernels_by_op == expected["kernels_by_op"]
    assert rule.launch_by_executable == expected["launch_by_executable"]
    assert rule.limits == {key: expected[key] for key in rule.limits}
    for name in ("kernels_by_op", "launch_by_executable", "dispatches_by_function"):
        assert list(expected[name]) == sorted(expected[name])  # stable diffs of the file


def test_blocks_are_shared_round_robin_between_worker_pairs():
    from scanbench.gate.interleave import _round_robin

    class Fake:
        def __init__(self, name):
            self.name, self.calls = name, 0

        def samples(self, count):
            self.calls += 1
            return [self.name] * count

    workers = [Fake(0.1), Fake(0.2)]
    sampler = _round_robin(workers)
    assert [sampler(2) for _ in range(4)] == [[0.1, 0.1], [0.2, 0.2]] * 2
    assert [w.calls for w in workers] == [2, 2]


def test_a_baseline_rule_may_set_its_own_worker_pairs_and_blocks(tmp_path):
    path = tmp_path / "gates.toml"
    path.write_text(
        '[settings]\nworker_pairs = 2\nblocks = 40\n\n[[baseline]]\nscenario = "tridiagonal"\n'
        'backend = "sequential-jax"\nsize = "smoke"\nworker_pairs = 4\n'
    )
    gates = load_gates(path)
    (rule,) = gates.baselines
    own = rule.settings(gates.settings)
    assert (own.worker_pairs, own.blocks) == (4, 40)
    path.write_text(path.read_text() + "blocks = 0\n")
    with pytest.raises(InputError, match="blocks must be finite and > 0"):
        load_gates(path)


def test_a_gate_file_at_the_old_default_is_named_not_used(tmp_path, monkeypatch, capsys):
    (tmp_path / "gate").mkdir()
    (tmp_path / "gate" / "gates.toml").write_text("[settings]\n")
    monkeypatch.chdir(tmp_path)
    assert main(["gate"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "no bench/gates.toml here, but gate/gates.toml exists" in line

"""The regression gate: exact count rules that name the culprit, invariants decided on
bootstrap intervals, the seeded interleaving scheduler, A/A and injected slowdowns."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import numpy as np
import pytest
import tomli_w

from scanbench.api import InputError, UnknownNameError
from scanbench.cli.main import main
from scanbench.gate.command import calibrate
from scanbench.gate.decide import (
    check_counts,
    check_invariants,
    count_expectation,
    decide_invariant,
    paired_decision,
)
from scanbench.gate.interleave import SIDES, interleaved_blocks, schedule
from scanbench.gate.render import calibration_markdown, describe, markdown
from scanbench.gate.rules import Invariant, load_count_rules, load_gates
from scanbench.results import load_run, write_run

DATA = Path(__file__).parent / "data"
TOY = str(Path(__file__).parent / "scenario_files" / "toy.py")


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


@pytest.mark.parametrize(
    ("ratio", "spread", "outcome"),
    [(3.0, 0.02, "pass"), (1.2, 0.02, "fail"), (2.0, 0.5, "inconclusive")],
)
def test_invariant_decides_on_the_interval(ratio, spread, outcome):
    rng = np.random.default_rng(1)
    fast = 1e-3 * (1 + spread * rng.standard_normal(40))
    slow = ratio * 1e-3 * (1 + spread * rng.standard_normal(40))
    verdict = decide_invariant(INVARIANT, slow, fast, confidence=0.99, seed=0)
    assert verdict.outcome == outcome, describe(verdict)


def test_an_invariant_compares_whole_calls_of_a_cell_measured_in_part():
    """A loop measured on 1 of 8 generations stores the reduced call's samples and the
    factor: 8 x its samples, not the samples, are compared with the scan's."""
    from scanbench.api import Record

    rng = np.random.default_rng(3)
    fast = list(1e-3 * (1 + 0.02 * rng.standard_normal(40)))
    part = list(0.5e-3 * (1 + 0.02 * rng.standard_normal(40)))  # 1/8 of a 4 ms call
    scaled = {"scaled": {"along": "generations", "measured": 1, "full": 8, "factor": 8.0}}
    records = [
        Record("s", "fast", "scanned", "jax", "smoke", "float32", 0, "ok", samples_s=tuple(fast)),
        Record("s", "slow", "sequential", "jax", "smoke", "float32", 0, "ok",
               samples_s=tuple(part), sampling=scaled),
    ]  # fmt: skip
    (verdict,) = check_invariants([INVARIANT], records, confidence=0.99, seed=0)
    assert verdict.outcome == "pass", describe(verdict)  # 4x, not 0.5x


def test_within_invariant_is_an_upper_bound():
    within = Invariant("s", "smoke", faster="fast", slower="slow", within=1.5)
    rng = np.random.default_rng(2)
    fast = 1e-3 * (1 + 0.02 * rng.standard_normal(40))
    assert decide_invariant(within, 1.2 * fast, fast, 0.99, 0).outcome == "pass"
    assert decide_invariant(within, 2.0 * fast, fast, 0.99, 0).outcome == "fail"


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
        decision = paired_decision(blocks["baseline"], blocks["candidate"], 0.10, 10e-6, 0.99, seed)
        assert not decision.suspect and 0.9 < decision.ratio < 1.1


def test_a_slowdown_of_one_side_is_suspect():
    base, cand = DriftingClock(1e-3), DriftingClock(1.3e-3)
    blocks = interleaved_blocks(
        {"baseline": base.samples, "candidate": cand.samples}, blocks=20, per_block=5, seed=0
    )
    decision = paired_decision(blocks["baseline"], blocks["candidate"], 0.10, 10e-6, 0.99, 0)
    assert decision.suspect and decision.low > 1.1
    # the same slowdown below the absolute floor is not
    below = paired_decision(blocks["baseline"], blocks["candidate"], 0.10, 1.0, 0.99, 0)
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


def test_real_workers_detect_an_injected_2x_slowdown_and_pass_aa(tmp_path):
    gates = load_gates(toy_gates(tmp_path))
    slowed = calibrate(gates, repetitions=1, slowdown=2.0, timeout_s=120)
    assert slowed.failing_repetitions == 1
    (verdict,) = slowed.verdicts[0]
    assert "confirming re-run" in describe(verdict)
    same = calibrate(gates, repetitions=1, slowdown=1.0, timeout_s=120)
    assert same.failing_repetitions == 0, calibration_markdown(same)
    assert "false alarms (identical code on both sides): **0 of 1**" in calibration_markdown(same)


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


def test_markdown_lists_failures_first():
    from scanbench.gate.decide import Kind, Outcome, Verdict

    ok = Verdict(Kind.COUNT, "a", Outcome.PASS, reason="ok")
    text = markdown([ok, Verdict(Kind.INVARIANT, "b", Outcome.FAIL, reason="x|y")])
    lines = text.splitlines()
    assert lines[0] == "## scanbench gate: FAILED" and "2 rules: 1 failed" in text
    assert lines[6] == "| fail | invariant | b | x\\|y |"


def test_against_head_builds_a_worktree_and_compares(tmp_path):
    gates = {
        "settings": {"blocks": 4, "samples_per_block": 3},
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

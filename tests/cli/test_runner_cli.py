"""Runner and CLI end to end: failed cells are stored, the others still run."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from scanbench.cells import Cell
from scanbench.cli.main import main
from scanbench.execution.launcher import measure_cell
from scanbench.results import load_run
from scanbench.sampling import TimingConfig
from scanbench.stages import COMPILE_STAGE, FIRST_CALL_STAGE, IMPORTS_STAGE, PREPARE_STAGES
from tests.support.paths import SCENARIO_FILES

TOY = str(SCENARIO_FILES / "toy.py")


def test_run_with_failing_cells(tmp_path):
    """One CLI run: good succeeds, every kind of failure is stored, exit code is 1."""
    out = tmp_path / "toy.json"
    md = tmp_path / "toy.md"
    backends = ["good", "wrong", "wrong-later", "crash", "hang", "default-only"]
    command = [sys.executable, "-m", "scanbench.cli.main", "run", "--scenario-file", TOY]
    command += [arg for name in backends for arg in ("--backend", name)]
    command += ["--size", "smoke", "--min-time", "0.01", "--max-time", "0.2", "--timeout", "20"]
    command += ["--out", str(out), "--md", str(md)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stderr
    run = load_run(out)
    by_name = {record.backend: record for record in run.records}
    assert list(by_name) == backends
    good = by_name["good"]
    assert good.status == "ok" and good.stats["count"] >= 5 and good.max_error == 0.0
    assert len(good.samples_s) == good.stats["count"]
    assert by_name["wrong"].status == "failed"
    assert "MismatchError" in by_name["wrong"].error and not by_name["wrong"].samples_s
    assert by_name["wrong-later"].status == "failed"  # caught by the check after timing
    assert by_name["crash"].status == "failed" and "code 3" in by_name["crash"].error
    assert by_name["hang"].status == "failed" and "timeout" in by_name["hang"].error
    assert by_name["default-only"].status == "skipped"
    assert "slow" in by_name["default-only"].error
    # a skipped cell's time is its own stage, not the worker's start-up
    assert "skipped: estimate" in by_name["default-only"].extra["phases_s"]
    assert "process start-up and exit" in by_name["default-only"].extra["phases_s"]
    # the one-thread DRAM copy of the measured levels, what older results' reports read
    dram = run.environment["memory_levels"][-1]
    assert dram["name"] == "DRAM" and dram["bytes_per_s"] > 0
    assert run.environment["memory_bandwidth"]["bytes_per_s"] == dram["bytes_per_s"]
    assert run.environment["memory_bandwidth"]["copy_bytes"] == dram["working_set_bytes"] / 2
    assert run.environment["device_count"] >= 1
    # a run with probes prices its counts: the unit costs and rates are measured in it
    assert run.environment["overheads"]["dispatch_queued_s"] > 0
    assert run.environment["rates"]["numpy_call_s"] > 0
    markdown = md.read_text()
    assert "| good " in markdown and "**wrong** failed: MismatchError" in markdown
    assert "**default-only** skipped" in markdown
    assert markdown in result.stdout


def test_worker_runs_a_registered_scenario_cell_with_counts_and_decomposition():
    cell = Cell("tridiagonal", "scanned-time-major", "smoke", "float32")
    costs = {
        "dispatch_queued_s": 1e-5,
        "kernel_launch_s": 1e-7,
        "h2d_latency_s": 1e-5,
        "h2d_bytes_per_s": 1e9,
    }
    record = measure_cell(
        cell, TimingConfig(min_time_s=0.01, min_count=3, max_time_s=0.2), 300, {"overheads": costs}
    )
    assert record.status == "ok", record.error
    assert record.x64 is False and record.max_error < 1e-4
    assert record.work["systems"] == 1_000 and record.prepare_s > 0
    trace = record.counts.trace
    assert trace["dispatches"] == 1 and trace["kernels"] == record.counts.static["kernels"]
    assert record.counts.transfers["h2d"] == 0
    assert record.decomposition["launch_s"] == pytest.approx(trace["kernels"] * 1e-7)
    phases = record.extra["phases_s"]  # the worker's stages plus the runner's share
    assert {"sampling", "counting", "process start-up and exit", "interference probes"} <= set(
        phases
    )
    # prepare in its parts, and the worker's own imports, each a stage
    assert {IMPORTS_STAGE, *PREPARE_STAGES} <= set(phases)
    assert phases[COMPILE_STAGE] >= record.prepare_s > 0
    assert phases[FIRST_CALL_STAGE] >= record.first_call_s > 0
    assert sum(phases.values()) > record.wall_s


def test_profile_command_writes_a_trace(tmp_path):
    out = tmp_path / "trace"
    command = [sys.executable, "-m", "scanbench.cli.main", "profile", "--scenario", "tridiagonal"]
    command += ["--backend", "sequential-jax", "--size", "smoke", "--out", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "100  jit(_forward_column)" in result.stdout
    assert list(out.rglob("*.xplane.pb")) and list(out.rglob("perfetto_trace.json.gz"))
    (perfetto,) = out.rglob("perfetto_trace.json.gz")  # its real path is printed
    assert f"Perfetto (ui.perfetto.dev): {perfetto.resolve()}" in result.stdout
    assert "scanbench profile" not in result.stdout  # the trace is written: it is named


def test_profile_starts_its_worker_as_the_cell_worker_with_the_declared_flags(tmp_path):
    """The blocked TDMA solver declares the flag that compiles its loops into native
    kernels: traced without it, one call at smoke runs its 100 + 99 loop iterations as
    8 + 5 kernels each (about 1,300), with it a handful (7 seen)."""
    command = [sys.executable, "-m", "scanbench.cli.main", "profile", "--scenario", "tridiagonal"]
    command += ["--backend", "scanned-blocked", "--size", "smoke", "--out", str(tmp_path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    kernels = re.search(r"executions: 1, kernels: (\d+),", result.stdout)
    assert kernels and int(kernels.group(1)) < 20, result.stdout


def run_cli(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.err


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--scenario", "tridiagnal"], "unknown scenario 'tridiagnal'; choose one of: tridiagonal"),
        (
            ["--scenario", "tridiagonal", "--backend", "scna"],
            "unknown backend 'scna' for scenario 'tridiagonal'; choose one of: sequential-numpy",
        ),
        (
            ["--size", "huge"],
            "unknown size 'huge' for scenario 'tridiagonal'; choose one of: smoke",
        ),
        (["--dtype", "float16"], "unknown dtype 'float16'"),
        (["--scenario-file", "/nonexistent.py"], "no such file"),
        (["--seed", "-1"], "--seed must be >= 0"),
    ],
)
def test_unknown_names_give_one_clean_line(capsys, argv, expected):
    code, err = run_cli(capsys, "run", *argv)
    assert code == 2
    assert expected in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_repeated_size_adds_to_the_list_or_is_refused_where_one_is_taken(capsys):
    """`run --size smoke --size default` runs both (argparse kept the last, silently);
    a command of one size says it was given two."""
    from scanbench.cli.main import build_parser

    args = build_parser().parse_args(["run", "--size", "smoke", "--size", "default"])
    assert args.size == "smoke,default"
    assert build_parser().parse_args(["run"]).size == "default"
    code, err = run_cli(capsys, "run", "--size", "smoke", "--size", "smoke")
    assert code == 2 and "--size must be size names" in err and "each once" in err
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(["profile", "--size", "smoke", "--size", "default"])
    assert stopped.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--size given twice ('smoke', then 'default'); this command takes one" in line


def test_report_of_a_corrupt_file(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema_version": 99}))
    code, err = run_cli(capsys, "report", str(bad))
    assert code == 2 and "schema version 99" in err and str(bad) in err


def test_list_shows_backends_strategies_and_sizes(capsys):
    assert main(["list", "--scenario-file", TOY]) == 0
    out = capsys.readouterr().out
    assert "tridiagonal:" in out and "toy:" in out
    assert "scanned-time-major" in out and "numba" in out
    assert "default    batch=100_000, n=100" in out
    assert "[only at: default]" in out


def test_argparse_rejects_bad_budgets(capsys):
    assert main(["run", "--min-time", "-1"]) == 2
    assert "--min-time must be finite and >= 0" in capsys.readouterr().err
    assert main(["run", "--max-time", "0"]) == 2
    assert "--max-time must be finite and > 0" in capsys.readouterr().err
    assert main(["run", "--target-width", "-0.5"]) == 2
    assert "--target-width must be finite and >= 0" in capsys.readouterr().err


def test_a_resumed_run_compares_the_facts_without_measuring_the_machine():
    """Resuming compares versions, device, commit: no bandwidth, unit costs or rates."""
    from scanbench.execution.launcher import collect_environment
    from scanbench.execution.runner import RESUME_MUST_MATCH

    facts = collect_environment(measure=False)
    assert set(RESUME_MUST_MATCH) <= set(facts)
    assert not {"overheads", "rates", "memory_levels"} & set(facts)


def test_a_run_without_probes_measures_the_machine_but_no_unit_costs(monkeypatch, tmp_path):
    """Unit costs and rates price counts, which --no-probes takes none of: the run's
    environment worker measures the memory levels (the reports' limits) and skips them."""
    from scanbench.execution import runner
    from scanbench.execution.launcher import collect_environment

    machine = collect_environment(unit_costs=False)
    assert machine["memory_levels"][-1]["bytes_per_s"] > 0 and machine["memory_bandwidth"]
    assert not {"overheads", "rates"} & set(machine)

    asked = []

    def environment(**options):
        asked.append(options)
        raise KeyboardInterrupt  # stop the run before its cells: only the call is checked

    monkeypatch.setattr(runner, "collect_environment", environment)
    for flag, unit_costs in ((["--no-probes"], False), ([], True)):
        argv = ["run", "--scenario-file", TOY, "--backend", "good", "--size", "smoke"]
        with pytest.raises(KeyboardInterrupt):
            main([*argv, *flag, "--out", str(tmp_path / f"{unit_costs}.json"), "--quiet"])
        assert asked.pop() == {"unit_costs": unit_costs}

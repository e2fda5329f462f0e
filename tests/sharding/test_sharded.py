"""The sharded strategy on 8 virtual CPU devices, and across 2 processes on loopback.

JAX fixes its device count when it starts, so every multi-device run here is a fresh
process (`scanbench run --devices N` sets XLA_FLAGS for its cell workers)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from scanbench.api import InputError
from scanbench.cells import Cell, cell_spec, scenario_of
from scanbench.sampling import TimingConfig
from scanbench.sharding.distributed import distributed_settings, environ_for
from scanbench.sharding.placement import padded_size
from scanbench.xla_options import merge
from tests.support.paths import REPO_ROOT, SUPPORT

ROOT = REPO_ROOT


def scanbench(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "scanbench.cli.main", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def run_script(name: str) -> subprocess.CompletedProcess:
    """A script of tests/support/ in its own process (8 virtual devices need one)."""
    command = [sys.executable, str(SUPPORT / name)]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def eight_device_run():
    """MPPI scanned (1 device) and sharded (8), TDMA sharded (8), at smoke, with probes:
    each in a cell worker given its devices the way `scanbench run --devices` does."""
    from scanbench.execution.launcher import run_cell_in_worker

    timing = TimingConfig(min_time_s=0.05, min_count=3, max_time_s=0.3)
    cells = [
        Cell("mppi_tuning", "scanned", "smoke", "float32", devices=1),
        Cell("mppi_tuning", "sharded", "smoke", "float32", devices=8),
        Cell("tridiagonal", "sharded", "smoke", "float64", devices=8),
    ]
    records = [run_cell_in_worker(cell, timing, 600, probes=True) for cell in cells]
    return {(r.scenario, r.backend, r.device.get("cell_devices")): r for r in records}


def test_sharded_backends_pass_the_reference_check_on_8_devices(eight_device_run):
    for key in [("mppi_tuning", "sharded", 8), ("tridiagonal", "sharded", 8)]:
        record = eight_device_run[key]
        assert record.status == "ok", record.error  # ok = checked against the reference
        assert record.device["cell_devices"] == 8 and record.device["device_count"] == 8


def test_sharded_tuning_follows_the_scanned_trajectory(eight_device_run):
    scanned = eight_device_run[("mppi_tuning", "scanned", 1)].extra["output"]
    sharded = eight_device_run[("mppi_tuning", "sharded", 8)].extra["output"]
    # the per-candidate fitness is bitwise equal (test below); ask/tell may round
    # differently in the last bit when fused differently
    assert sharded["best_fitness_per_generation"] == pytest.approx(
        scanned["best_fitness_per_generation"], rel=1e-6
    )
    assert sharded["tuned_sigma"] == pytest.approx(scanned["tuned_sigma"], rel=1e-5)


def test_one_launch_executes_once_on_every_device(eight_device_run):
    for scenario in ("mppi_tuning", "tridiagonal"):
        counts = eight_device_run[(scenario, "sharded", 8)].counts
        trace = counts.trace
        assert trace["dispatches"] == 1, trace["dispatches_by_function"]
        assert trace["executions_by_device"] == {str(d): 1 for d in range(8)}
        # every device runs the program the static HLO estimate describes, on its block
        per_device = trace["kernels"] / 8
        assert per_device == pytest.approx(counts.static["kernels"], rel=0.01)


def test_a_trace_sees_every_device_of_every_launch():
    """The trace stays open until worker threads close their per-device scopes."""
    result = run_script("trace_settle.py")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


def test_sharded_fitness_is_bitwise_equal_to_unsharded_for_the_same_candidates():
    result = run_script("sharded_equivalence.py")
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert data["devices"] == 8
    for count in ("8", "5", "11"):  # 5 and 11 are padded to 8 and 16 inside
        assert data[count]["shape"] == [int(count)]
        assert data[count]["bitwise_equal"], data[count]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_two_processes_on_loopback_equal_one_process(eight_device_run, tmp_path):
    """2 processes x 4 CPU devices (jax.distributed over 127.0.0.1) give the same tuning
    as 1 process x 8 devices; each process checks its result against the reference."""
    cell = Cell("mppi_tuning", "sharded", "smoke", "float32")
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps(cell_spec(cell, TimingConfig(min_time_s=0.0, min_count=2, max_count=2), False))
    )
    settings = distributed_settings(f"127.0.0.1:{_free_port()}", 2, 0)
    backend = scenario_of(cell).backend(cell.backend)
    processes = []
    for process_id in range(2):
        env = environ_for(4, os.environ, {**settings, "SCANBENCH_PROCESS_ID": str(process_id)})
        del env["SCANBENCH_DEVICES"]  # all 8 devices of both processes
        env["XLA_FLAGS"] = merge(env["XLA_FLAGS"], backend.xla_flags)  # as its own worker
        out = tmp_path / f"record-{process_id}.json"
        command = [sys.executable, "-m", "scanbench.execution.worker", "cell", str(spec), str(out)]
        processes.append(
            (out, subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True))
        )
    records = []
    for out, process in processes:
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr[-3000:]
        records.append(json.loads(out.read_text()))
    single = eight_device_run[("mppi_tuning", "sharded", 8)].extra["output"]
    for record in records:
        if record["status"] != "ok" and "UNIMPLEMENTED" in (record["error"] or ""):
            pytest.skip(f"this jax cannot run multi-process on CPU: {record['error']}")
        assert record["status"] == "ok", record["error"]
        assert record["device"]["processes"] == 2 and record["device"]["cell_devices"] == 8
        output = record["extra"]["output"]
        assert output["best_fitness_per_generation"] == single["best_fitness_per_generation"]
        # the CMA-ES update (replicated, compiled for another topology) may round the
        # last float32 bit differently: ~1e-7 relative
        assert output["final_mean_log"] == pytest.approx(single["final_mean_log"], rel=1e-6)
        assert len(record["samples_s"]) == 2  # by count: both processes make the same calls


def test_device_settings_are_validated():
    assert padded_size(5, 8) == 8 and padded_size(16, 8) == 16
    env = environ_for(4, {"XLA_FLAGS": "--xla_foo=1 --xla_force_host_platform_device_count=2"})
    assert env["XLA_FLAGS"] == "--xla_foo=1 --xla_force_host_platform_device_count=4"
    assert env["SCANBENCH_DEVICES"] == "4"
    assert distributed_settings(None, None, None) == {}
    with pytest.raises(InputError, match="needs all of --coordinator"):
        distributed_settings("127.0.0.1:1", 2, None)
    with pytest.raises(InputError, match=r"--process-id must be in \[0, 2\)"):
        distributed_settings("127.0.0.1:1", 2, 2)
    result = scanbench("run", "--devices", "0,2")
    assert result.returncode == 2 and "--devices must be device counts >= 1" in result.stderr


def test_too_many_devices_fail_the_cell_clearly(tmp_path):
    from scanbench.execution.launcher import run_cell_in_worker

    cell = Cell("tridiagonal", "sharded", "smoke", "float64")
    env = dict(os.environ, SCANBENCH_DEVICES="16")  # more than the one per core it will see
    once = TimingConfig(min_time_s=0.0, min_count=1, max_count=1)
    record = run_cell_in_worker(cell, once, 300, False, environ=env)
    cores = len(os.sched_getaffinity(0))
    assert record.status == "failed" and f"--devices 16: only {cores} cpu device(s)" in record.error

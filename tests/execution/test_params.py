"""Backend parameters: `--param NAME=V1,V2` runs one cell per value, checked, stored and
shown; a parameter's values are validated at the door."""

from __future__ import annotations

import os

import pytest

from scanbench.api import InputError, UnknownNameError
from scanbench.cells import Cell, select
from scanbench.cli.main import main
from scanbench.execution.launcher import worker_environ
from scanbench.execution.worker import run_cell
from scanbench.reports.markdown import render
from scanbench.reports.model import build
from scanbench.sampling import TimingConfig

QUICK = TimingConfig(warmup=0, min_time_s=0.0, min_count=3, max_count=3)


def test_a_sweep_runs_each_declaring_backend_once_per_value():
    cells = select(
        ["tridiagonal"],
        ["scanned-blocked", "numba-serial"],
        "smoke",
        params={"block": ["250", "500"]},
    )
    labels = [cell.label for cell in cells]
    assert labels == [
        "tridiagonal/scanned-blocked[block=250]/smoke/float64",
        "tridiagonal/scanned-blocked[block=500]/smoke/float64",
        "tridiagonal/numba-serial/smoke/float64",  # declares no block: once, as it is
    ]
    assert cells[0].params == (("block", 250),) and cells[0].key != cells[1].key


@pytest.mark.parametrize(
    ("params", "error", "message"),
    [
        ({"blok": ["1"]}, UnknownNameError, "unknown --param 'blok'"),
        ({"block": ["many"]}, InputError, "--param block=many: backend 'scanned-blocked'"),
        ({"block": ["0"]}, InputError, "takes an int >= 1"),
    ],
)
def test_bad_parameters_are_refused_before_anything_runs(params, error, message):
    with pytest.raises(error, match=None) as info:
        select(["tridiagonal"], ["scanned-blocked"], "smoke", params=params)
    assert message in str(info.value)


def test_the_cli_refuses_a_malformed_param_in_one_line(capsys):
    assert main(["run", "--scenario", "tridiagonal", "--param", "block", "--size", "smoke"]) == 2
    assert main(["run", "--scenario", "tridiagonal", "--param", "block=1,1"]) == 2
    err = capsys.readouterr().err
    assert err.count("scanbench: error:") == 2 and "expected NAME=V1,V2" in err
    assert "each once" in err


def test_a_cell_is_built_with_its_parameters_checked_and_stored():
    cell = Cell("tridiagonal", "scanned-blocked", "smoke", "float64", params={"block": 300})
    record = run_cell(cell, QUICK, probes=False)
    assert record.status == "ok", record.error
    assert record.params == {"block": 300} and record.key == cell.key


def test_reports_label_parameters_and_plot_a_sweep(tmp_path):
    out = tmp_path / "sweep.json"
    argv = ["run", "--scenario", "tridiagonal", "--backend", "scanned-blocked", "--size",
            "smoke", "--param", "block=250,500", "--no-probes", "--min-time", "0",
            "--min-count", "3", "--max-time", "0.2", "--out", str(out), "--quiet",
            "--html", str(tmp_path / "sweep.html")]  # fmt: skip
    assert main(argv) == 0
    from scanbench.results import load_run

    text = render(build([load_run(out)]))
    assert "scanned-blocked[block=250]" in text and "scanned-blocked[block=500]" in text
    page = (tmp_path / "sweep.html").read_text()
    assert "scanned-blocked vs block" in page


def test_a_sharded_backend_gets_one_cpu_device_per_core_unless_told():
    sharded = Cell("tridiagonal", "sharded", "smoke", "float64")
    cores = len(os.sched_getaffinity(0))
    flags = worker_environ(sharded, {})["XLA_FLAGS"]
    assert f"--xla_force_host_platform_device_count={cores}" in flags
    assert "xla_cpu_small_while_loop_byte_threshold" in flags  # the backend's own flag
    assert "SCANBENCH_DEVICES" not in worker_environ(sharded, {})  # a GPU keeps every GPU
    told = worker_environ(Cell("tridiagonal", "sharded", "smoke", "float64", devices=3), {})
    assert "--xla_force_host_platform_device_count=3" in told["XLA_FLAGS"]
    assert "XLA_FLAGS" not in worker_environ(Cell("tridiagonal", "vmapped", "smoke", "float64"), {})
    given = worker_environ(sharded, {"XLA_FLAGS": "--xla_force_host_platform_device_count=4"})
    assert given["XLA_FLAGS"].count("device_count") == 1  # the user's count stands

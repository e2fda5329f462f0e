"""The shards of a run as submitit jobs, end to end with submitit's local executor: the
submitting process is stopped after the first job started, a second command picks the
jobs up by their ids, submits the rest and gathers one run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from scanbench.execution.executors import jobs_path, read_jobs
from scanbench.gathered import shard_of
from scanbench.results import load_run
from tests.support.paths import SCENARIO_FILES

TOY = str(SCENARIO_FILES / "toy.py")
FAST = ["--size", "smoke", "--min-time", "0.01", "--max-time", "0.2", "--no-probes"]


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SCANBENCH_"))}


@pytest.mark.slow
def test_local_jobs_survive_the_submitter_and_are_picked_up_by_id(tmp_path):
    out = tmp_path / "merged.json"
    command = [sys.executable, "-m", "scanbench.cli.main", "run", "--scenario-file", TOY]
    command += ["--backend", "good", "--backend", "delayed", *FAST, "--no-overlap"]
    command += ["--executor", "local", "--shards", "2", "--shard-by", "cell"]
    command += ["--out", str(out), "--md", str(tmp_path / "merged.md"), "--quiet"]
    log = tmp_path / "submitter.log"  # a file: the job it starts inherits the descriptor
    with open(log, "w") as stderr:
        submitter = subprocess.Popen(command, cwd=tmp_path, env=_environment(), stderr=stderr)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # until shard 1's job is submitted
        if jobs_path(out).exists() and read_jobs(out).shards[0].job_id:
            break
        assert submitter.poll() is None, log.read_text()
        time.sleep(0.5)
    first_job = read_jobs(out).shards[0].job_id
    submitter.send_signal(signal.SIGTERM)  # the submitter alone: its job goes on
    submitter.wait(timeout=120)
    said = log.read_text()
    assert submitter.returncode == 128 + signal.SIGTERM, said
    assert f"job ids: {first_job}); pick them up with `scanbench run --resume {out}`" in said
    assert "shards 0/2 done, cells 0/2, queue: 1 RUNNING" in said

    picked = subprocess.run(
        [sys.executable, "-m", "scanbench.cli.main", "run", "--resume", str(out), "--quiet"],
        cwd=tmp_path, env=_environment(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert picked.returncode == 0, picked.stderr
    assert f"shard 1/2: job {first_job} picked up" in picked.stderr
    assert "shard 2/2: submitted as job" in picked.stderr
    assert "shards 2/2 done, cells 2/2" in picked.stderr
    jobs = read_jobs(out)
    assert jobs.shards[0].job_id == first_job and jobs.shards[1].job_id not in (None, first_job)
    merged = load_run(out)
    assert [r.backend for r in merged.records] == ["good", "delayed"]
    assert all(r.status == "ok" for r in merged.records)
    assert sorted(shard_of(r) for r in merged.records) == [1, 2]
    gathered = merged.invocation.gathered
    assert gathered.count == 2 and [s.cells for s in gathered.shards] == [1, 1]
    assert (tmp_path / "merged.md").exists()
    assert json.loads(out.read_text())["environment"]["shards"][1]["index"] == 2

"""Shards: the split (every cell once, deterministic, balanced), the gather's refusals, a
gathered run read by the reports, the history and the gate as any run, and the SLURM
settings submitit is given. The local executor end to end is in test_executors.py."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scanbench.api import InputError, Record, StoreError
from scanbench.cells import Cell
from scanbench.cli.main import main
from scanbench.execution import executors, gathering, shards
from scanbench.gathered import by_kind, environment_of, shard_of
from scanbench.history.costs import earlier_costs
from scanbench.invocation import CommandLine, Invocation, Plan
from scanbench.results import Run, load_run, write_run
from scanbench.sampling import TimingConfig
from scanbench.sources import file_source
from tests.support.paths import SCENARIO_FILES

TOY = str(SCENARIO_FILES / "toy.py")
SOURCE = file_source(TOY)
TIMING = TimingConfig(min_time_s=0.01, max_time_s=0.2)
SHA = "0123456789abcdef0123456789abcdef01234567"


def toy_cells(backends=("good", "delayed", "in-place", "nan"), sizes=("smoke", "default")):
    return [
        Cell("toy", backend, size, "float64", source=SOURCE)
        for size in sizes
        for backend in backends
    ]


# ---------------------------------------------------------------- the split


@pytest.mark.parametrize(("text", "spec"), [("1/1", (1, 1)), ("2/3", (2, 3)), (" 4 / 4 ", (4, 4))])
def test_parse_shard(text, spec):
    parsed = shards.parse_shard(text)
    assert (parsed.index, parsed.count) == spec


@pytest.mark.parametrize("text", ["0/3", "4/3", "3", "a/b", "1/0", "-1/2", ""])
def test_parse_shard_refuses_with_the_form(text):
    with pytest.raises(InputError, match=r"--shard must be K/N with 1 <= K <= N"):
        shards.parse_shard(text)


@settings(max_examples=60, deadline=None)
@given(
    costs=st.lists(st.floats(0.0, 100.0), min_size=1, max_size=24),
    count=st.integers(1, 9),
    unit=st.sampled_from(shards.UNITS),
)
def test_every_cell_is_in_exactly_one_shard(costs, count, unit):
    cells = [
        Cell("toy", "good", size, "float64", seed=i, source=SOURCE)
        for i, size in zip(range(len(costs)), ["smoke", "default"] * 12, strict=False)
    ]
    placed = shards.assign(cells, costs, count, unit)
    assert len(placed) == count
    flat = sorted(p for shard in placed for p in shard)
    assert flat == list(range(len(cells)))
    assert placed == shards.assign(cells, costs, count, unit)  # deterministic
    # LPT: no shard exceeds the best possible makespan by more than the largest unit
    loads = [sum(costs[i] for i in shard) for shard in placed]
    assert max(loads) <= sum(costs) / count + max(costs) + 1e-6


def test_a_table_stays_in_one_shard_and_cells_split_finer():
    cells = toy_cells()
    costs = shards.expected_costs(cells, TIMING, probes=False)
    by_table = shards.assign(cells, costs, 2, "table")
    assert [sorted({cells[i].size for i in shard}) for shard in by_table] == [
        ["default"],
        ["smoke"],
    ]  # the default table costs more (the model's size rank): it goes first
    by_cell = shards.assign(cells, costs, 3, "cell")
    assert sorted(len(shard) for shard in by_cell) == [2, 3, 3]


def test_the_model_and_an_earlier_results_file_set_the_costs(tmp_path):
    cells = toy_cells(backends=("good", "delayed"), sizes=("smoke",))
    model = shards.expected_costs(cells, TIMING, probes=True)
    fixed = shards.STARTUP_S + shards.COUNTING_S
    assert model == [round(fixed + 0.2, 3)] * 2
    earlier = tmp_path / "earlier.json"
    record = _record(cells[1], 0.05)
    record = dataclasses.replace(record, extra={"phases_s": {"sampling": 7.0, "start": 2.5}})
    write_run(earlier, Run(_environment("a"), Invocation(), (record,)))
    chosen = shards.split(cells, 2, TIMING, True, "cell", earlier_costs(str(earlier), TIMING, True))
    assert chosen.costs == (round(fixed + 0.2, 3), 9.5)
    assert chosen.costs_from == "results earlier.json"
    assert chosen.expected_s == (9.5, 3.2)
    with pytest.raises(InputError, match=r"--shard-costs .*results file or a history"):
        earlier_costs(str(tmp_path / "missing.json"), TIMING, True)


def test_the_run_id_is_the_same_everywhere_unless_given():
    cells = toy_cells()
    first = shards.split(cells, 3, TIMING, False)
    assert first.run_id == shards.split(cells, 3, TIMING, False).run_id
    assert first.run_id != shards.split(cells, 2, TIMING, False).run_id
    assert shards.split(cells, 3, TIMING, False, run_id="gha-42").run_id == "gha-42"
    with pytest.raises(InputError, match="--run-id must be"):
        shards.split(cells, 3, TIMING, False, run_id="a b")


# ---------------------------------------------------------------- gathering


def _environment(host: str, cpu: str = "Toy CPU", cores: int = 2) -> dict:
    return {
        "hostname": host,
        "cpu_model": cpu,
        "cpu_count": cores,
        "platform": "cpu",
        "device_kind": "cpu",
        "device_count": 1,
        "versions": {"jax": "0.10.0", "jaxlib": "0.10.0"},
        "timestamp": "2026-01-01T00:00:00+00:00",
        "git": {"commit": SHA, "dirty": False, "branch": "main"},
    }


def _record(cell: Cell, median: float) -> Record:
    samples = (median * 0.99, median, median * 1.01) * 3
    return Record(
        scenario=cell.scenario,
        backend=cell.backend,
        strategy="sequential",
        engine="numpy",
        size=cell.size,
        dtype=cell.dtype,
        seed=cell.seed,
        status="ok",
        samples_s=samples,
        stats={"median": median, "count": len(samples), "min": min(samples)},
        work={"elements": 8.0},
        extra={"phases_s": {"sampling": 1.0}},
    )


def write_shards(folder: Path, count: int, unit="cell", hosts=None, cells=None, **change):
    """The shard files of a toy run (records made up), as `scanbench run --shard` writes
    them; ``hosts[k]`` is shard k+1's environment."""
    cells = cells or toy_cells()
    plan = Plan(tuple(cells), TIMING, 10.0, False)
    invocation = Invocation({}, plan, origin=CommandLine(("run",)))
    chosen = shards.split(cells, count, TIMING, False, unit, run_id=change.pop("run_id", None))
    paths = []
    for index in range(1, count + 1):
        shard_invocation = shards.restrict(invocation, chosen, index)
        mine = shard_invocation.plan.cells
        records = tuple(_record(cell, 0.001 * (i + 1)) for i, cell in enumerate(mine))
        environment = (hosts or {}).get(index) or _environment(f"host{index}")
        path = folder / f"shard-{index}-of-{count}.json"
        write_run(path, Run(environment, shard_invocation, records))
        paths.append(path)
    return paths


def test_gather_merges_in_the_run_order_and_says_who_measured_what(tmp_path):
    paths = write_shards(tmp_path, 3)
    read = [gathering.read_shard(p) for p in reversed(paths)]  # any order given
    merged = gathering.gather(read)
    assert [(r.backend, r.size) for r in merged.records] == [
        (c.backend, c.size) for c in toy_cells()
    ]
    owners = {shard.facts.index: set(shard.facts.positions) for shard in read}
    for position, record in enumerate(merged.records):
        assert position in owners[shard_of(record)]
        assert environment_of(merged, record)["hostname"] == f"host{shard_of(record)}"
    gathered = merged.invocation.gathered
    assert [s.index for s in gathered.shards] == [1, 2, 3]
    assert sum(s.cells for s in gathered.shards) == len(toy_cells())
    assert merged.invocation.shard is None and len(merged.invocation.plan.cells) == 8
    lines = gathering.describe(read)
    assert lines[0].startswith("shard 1/3 (shard-1-of-3.json): ")
    assert "on host1 (Toy CPU (2 cores), cpu x1)" in lines[0]
    assert lines[-1].startswith("balance: longest shard ")


def test_gather_refuses_in_one_line(tmp_path, capsys):
    paths = write_shards(tmp_path / "a", 3)
    other = write_shards(tmp_path / "b", 3, run_id="another")

    def refused(files, pattern):
        code = main(["gather", *map(str, files), "--out", str(tmp_path / "m.json")])
        err = capsys.readouterr().err
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert pattern in err, err
        assert not (tmp_path / "m.json").exists()

    refused(paths[:2], "is missing shard 3/3 (given: 1/3, 2/3)")
    refused([*paths, paths[1]], "shard 2/3 of run")
    refused([paths[0], paths[1], other[2]], "of run another: gather the shards of one run")
    # an interrupted shard: its journal is still there
    journal = paths[1].with_name(paths[1].name + ".journal")
    journal.write_text("{}\n")
    refused(paths, "is incomplete: 3 of 3 cells; continue it with `scanbench run --resume")
    journal.unlink()
    # a shard that measured another version of the scenario
    data = json.loads(paths[2].read_text())
    data["invocation"]["shard"]["scenario_versions"]["toy"] = "f" * 64
    paths[2].write_text(json.dumps(data))
    refused(paths, "measured scenario 'toy' at different versions")
    refused([TOY.replace(".py", ".missing")], "no such file or directory")
    plain = tmp_path / "plain.json"
    write_run(plain, Run(_environment("x"), Invocation(), ()))
    refused([plain], "is not a shard (no invocation.shard)")


def test_an_empty_shard_gathers(tmp_path):
    cells = toy_cells(sizes=("smoke",))  # one table: by table, shard 2 gets nothing
    paths = write_shards(tmp_path, 2, unit="table", cells=cells)
    assert load_run(paths[1]).records == ()
    merged = gathering.gather([gathering.read_shard(p) for p in paths])
    assert len(merged.records) == 4 and {shard_of(r) for r in merged.records} == {1}


def test_a_gathered_run_is_any_run_to_report_history_and_gate(tmp_path):
    """Two machines of different kinds: the report keeps them apart (tables of their
    own), the history gets one entry per kind."""
    from scanbench.history.archive import add
    from scanbench.reports.markdown import render
    from scanbench.reports.model import build

    hosts = {1: _environment("small"), 2: _environment("big", "Big CPU", 64)}
    paths = write_shards(tmp_path, 2, hosts=hosts)
    out = tmp_path / "merged.json"
    assert main(["gather", *map(str, paths), "--out", str(out), "--quiet"]) == 0
    merged = load_run(out)
    assert len(by_kind(merged)) == 2
    markdown = render(build([merged]))
    assert "on Big CPU (64 cores), cpu x1" in markdown and "on Toy CPU (2 cores)" in markdown
    assert "shard 1/2 (4 cells, shard-1-of-2.json): small" in markdown
    added = add([out], tmp_path / "history")
    machines = sorted(a.entry.machine.cpu_model for a in added)
    assert machines == ["Big CPU", "Toy CPU"]
    assert sorted(len(a.entry.cells) for a in added) == [4, 4]
    assert len({a.entry.run_id for a in added}) == 2
    again = add([out], tmp_path / "history")  # the same run again: nothing new
    assert {a.outcome.value for a in again} == {"already in the history"}


# ---------------------------------------------------------------- SLURM settings


def test_slurm_settings_from_toml_and_options(tmp_path):
    config = tmp_path / "slurm.toml"
    config.write_text(
        '[slurm]\npartition = "gpu"\ntime_limit = 90\ngpus_per_node = 4\n'
        'account = "lab"\nsetup = ["module load cuda"]\n'
    )
    chosen = executors.slurm_settings(str(config), partition="a100", time_limit=None)
    assert (chosen.partition, chosen.time_limit, chosen.gpus_per_node) == ("a100", 90, 4)
    parameters = executors.executor_parameters(chosen, 3, "r1", 90)
    assert parameters == {
        "name": "scanbench-r1",
        "timeout_min": 90,
        "nodes": 1,
        "tasks_per_node": 1,
        "slurm_array_parallelism": 3,
        "gpus_per_node": 4,
        "slurm_partition": "a100",
        "slurm_account": "lab",
        "slurm_exclusive": True,
        "slurm_setup": ["module load cuda"],
    }
    # every key is one submitit's AutoExecutor takes (generic, or slurm_ + SlurmExecutor's)
    import submitit

    generic = submitit.AutoExecutor._valid_parameters()
    slurm = submitit.SlurmExecutor._valid_parameters()
    for key in parameters:
        assert key in generic or key.removeprefix("slurm_") in slurm, key
    config.write_text('[slurm]\npartiton = "gpu"\n')
    with pytest.raises(InputError, match="unknown key \\[slurm\\] partiton; choose from"):
        executors.slurm_settings(str(config))
    config.write_text("[slurm]\ntime_limit = true\n")
    with pytest.raises(InputError, match="time_limit must be a int"):
        executors.slurm_settings(str(config))


def test_the_time_limit_comes_from_the_expected_costs():
    unset = executors.SlurmSettings()
    assert executors.time_limit(unset, (600.0, 1200.0)) == 60 + 30
    assert executors.time_limit(executors.SlurmSettings(time_limit=15), (1e6,)) == 15


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--shard", "1/2", "--executor", "local", "--shards", "2"], "give one"),
        (["--executor", "local"], "needs --shards N"),
        (["--partition", "gpu"], "--partition applies to --executor"),
        (["--run-id", "x"], "--run-id applies to --shard or --executor"),
        (["--shard", "3/2"], "--shard must be K/N"),
        (["--executor", "slurm", "--shards", "2"], "--executor slurm: SLURM's sbatch"),
        (["--resume", "x.json", "--shard", "1/2"], "--resume continues a run"),
    ],
)
def test_run_refuses_options_that_do_not_go_together(argv, message, tmp_path, capsys):
    base = ["run", "--scenario-file", TOY, "--backend", "good", "--size", "smoke"]
    assert main([*base, "--out", str(tmp_path / "r.json"), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_the_jobs_file_round_trips_and_the_progress_line_counts_saved_cells(tmp_path):
    paths = write_shards(tmp_path, 2)
    invocations = [json.loads(json.dumps(load_run(p).invocation.to_json())) for p in paths]
    pending = tmp_path / "shard-3.json"  # a shard not started: nothing saved yet
    jobs = executors.Jobs(
        "local", str(tmp_path), str(tmp_path / "out.json"), (None, None), "r1", str(tmp_path),
        30, {"timeout_min": 30},
        (
            executors.ShardJob(1, str(paths[0]), invocations[0], "101"),
            executors.ShardJob(2, str(paths[1]), invocations[1], None),
            executors.ShardJob(3, str(pending), invocations[1], None),
        ),
    )  # fmt: skip
    executors.save_jobs(jobs)
    assert executors.read_jobs(tmp_path / "out.json") == jobs
    line = executors.progress_line(jobs, {1: "RUNNING", 2: "PENDING", 3: "PENDING"})
    assert line == "shards 2/3 done, cells 8/12, queue: 2 PENDING, 1 RUNNING"
    (tmp_path / "out.json.jobs.json").write_text('{"jobs_version": 9}')
    with pytest.raises(StoreError, match="not a scanbench jobs file of version 1"):
        executors.read_jobs(tmp_path / "out.json")


def test_a_shard_job_resumes_on_its_host_and_keeps_another_hosts_file_aside(tmp_path, monkeypatch):
    import socket

    from scanbench.execution import runner

    monkeypatch.chdir(tmp_path)  # run_shard changes directory: restored after the test
    calls = []
    monkeypatch.setattr(runner, "resume", lambda path: calls.append(("resume", path)) or Run(
        {}, Invocation(), ()))  # fmt: skip
    monkeypatch.setattr(runner, "run", lambda inv, path: calls.append(("run", path)) or Run(
        {}, inv, ()))  # fmt: skip
    (path,) = write_shards(tmp_path, 1, hosts={1: _environment(socket.gethostname())})
    invocation = load_run(path).invocation.to_json()
    assert executors.run_shard(invocation, str(path), str(tmp_path)) == 0
    assert calls == [("resume", path)]
    calls.clear()
    write_run(path, dataclasses.replace(load_run(path), environment=_environment("elsewhere")))
    executors.run_shard(invocation, str(path), str(tmp_path))
    assert calls == [("run", path)] and not path.exists()
    assert (tmp_path / f"{path.name}.from-elsewhere").exists()


def test_the_jobs_folder_is_private_and_a_planted_one_is_refused(tmp_path):
    import stat

    folder = executors.jobs_folder(tmp_path / "out.json")
    assert folder == tmp_path / "out.json.jobs"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert executors.jobs_folder(tmp_path / "out.json") == folder  # an earlier submission's
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / "linked.json.jobs").symlink_to(elsewhere)
    with pytest.raises(InputError, match=r"jobs folder .* is a symbolic link"):
        executors.jobs_folder(tmp_path / "linked.json")
    (tmp_path / "shared.json.jobs").mkdir(mode=0o700)
    (tmp_path / "shared.json.jobs").chmod(0o770)
    with pytest.raises(InputError, match=r"has mode 0770 \(group or others can write it\)"):
        executors.jobs_folder(tmp_path / "shared.json")


def _jobs_at(tmp_path, folder, cwd):
    return executors.Jobs(
        "local", str(folder), str(tmp_path / "out.json"), (None, None), "r1", str(cwd), 30, {}, ()
    )


@pytest.mark.parametrize("where", ["folder", "cwd", "file"])
def test_resume_refuses_a_jobs_file_naming_what_others_can_write(tmp_path, capsys, where):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    folder = shared if where == "folder" else executors.jobs_folder(tmp_path / "out.json")
    cwd = shared if where == "cwd" else tmp_path
    executors.save_jobs(_jobs_at(tmp_path, folder, cwd))
    if where == "file":
        executors.jobs_path(tmp_path / "out.json").chmod(0o666)
    message = {"folder": "the jobs folder", "cwd": "the working directory", "file": "the jobs file"}
    with pytest.raises(InputError, match=message[where]):
        executors.read_jobs(tmp_path / "out.json")
    assert main(["run", "--resume", str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err
    assert message[where] in err and len(err.strip().splitlines()) == 1, err


def test_gather_refuses_a_shard_with_a_record_twice_or_of_no_cell_of_its_own(tmp_path, capsys):
    """Before: a duplicated record was dropped without a word (exit 0, 8 of 9 records)."""
    paths = write_shards(tmp_path, 2)
    pristine = paths[0].read_text()
    data = json.loads(pristine)
    data["records"].append(dict(data["records"][0], wall_s=99.0))
    paths[0].write_text(json.dumps(data))
    out = tmp_path / "m.json"
    assert main(["gather", *map(str, paths), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(
        "measures cell toy/delayed/smoke/float64 again; a shard holds one "
        "record per cell: was the file edited? keep one of them"
    ), err
    data["records"][-1]["backend"] = "good"  # shard 2's cell
    paths[0].write_text(json.dumps(data))
    assert main(["gather", *map(str, paths), "--out", str(out), "--quiet"]) == 2
    assert "which is not one of this shard's cells" in capsys.readouterr().err
    assert not out.exists()

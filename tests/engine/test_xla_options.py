"""XLA flags: declared by a backend (checked, merged, applied in its worker, recorded and
shown), refused by the installed jaxlib in one line, and measured by ``scanbench flags``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from scanbench import Strategy, jax_backend
from scanbench.api import InputError, UnknownNameError
from scanbench.cells import Cell
from scanbench.cli.main import main
from scanbench.diagnosis import Cost, Facts, diagnose
from scanbench.execution.launcher import run_cell_in_worker
from scanbench.gate import flag_search
from scanbench.gate.interleave import ServedCell, Side
from scanbench.gate.rules import BaselineRule
from scanbench.sampling import TimingConfig
from scanbench.sources import file_source, load
from scanbench.xla_options import flags_in_effect, merge, refusals
from tests.support.paths import SCENARIO_FILES

FLAGGED = file_source(str(SCENARIO_FILES / "flagged.py"))
FUSION = "--xla_backend_extra_options=xla_cpu_use_multi_output_fusion"
QUICK = TimingConfig(min_time_s=0.02, max_time_s=0.2, min_count=3, max_count=50)


def test_flags_merge_by_name_and_backend_options_into_one_flag():
    merged = merge(
        "--xla_a=1 --xla_backend_extra_options=p,q=2",
        ["--xla_a=3", "--xla_backend_extra_options=q=5,r"],
        "--xla_t=+eltwise",
        ("--xla_t=+reduce",),
    )
    assert merged == "--xla_a=3 --xla_t=+eltwise,+reduce --xla_backend_extra_options=p,q=5,r"
    assert merge(merged, merged.split()) == merge(merged)  # idempotent
    assert flags_in_effect([FUSION], f"--xla_a=1 {FUSION}")
    assert not flags_in_effect(["--xla_a=2"], "--xla_a=1")
    assert flags_in_effect((), "")
    order = "--xla_w=512 --xla_m=true --xla_backend_extra_options=b,a"
    assert flags_in_effect(["--xla_w=512"], order)  # merge moves it last: the same setting
    assert flags_in_effect(["--xla_backend_extra_options=a"], order)


@pytest.mark.parametrize(
    "flags, says",
    [
        (("xla_cpu_use_multi_output_fusion",), "expected --xla_NAME or --xla_NAME=VALUE"),
        (("--xla_backend_extra_options=",), "needs NAME[=VALUE] items"),
        (("--xla_a=1 --xla_b=2",), "without spaces"),
        ("--xla_a=1", "must be a tuple of flags"),
    ],
)
def test_a_malformed_declared_flag_is_refused_when_the_backend_is_built(flags, says):
    with pytest.raises(InputError, match=re.escape(says)) as caught:
        jax_backend("mine", Strategy.SCANNED, lambda x: x, xla_flags=flags)
    assert "backend 'mine'" in str(caught.value)


def test_the_installed_jaxlib_names_each_flag_it_refuses_or_would_ignore():
    good = "--xla_cpu_enable_fast_min_max=true"
    wrong = {
        "--xla_cpu_no_such_flag=1": "unknown to the installed jaxlib",
        "--xla_cpu_prefer_vector_width=wide": "cannot parse its value",
        "--xla_backend_extra_options=xla_cpu_use_multi_output_fusionn": "would ignore it",
        "--xla_backend_extra_options=no_such_llvm_option": "unknown to XLA and LLVM",
    }
    check = refusals([good, FUSION, *wrong])
    assert check.platform == "cpu"
    assert set(check.refused) == set(wrong)
    for flag, says in wrong.items():
        assert says in check.refused[flag]
    assert refusals([FUSION]).refused == {}


def _cell(backend: str) -> Cell:
    return Cell("flagged", backend, "smoke", "float32", 0, source=FLAGGED)


def test_a_backend_runs_with_its_flags_recorded_and_shown(tmp_path):
    record = run_cell_in_worker(_cell("fused"), QUICK, 300, probes=False)
    assert record.status == "ok", record.error
    assert record.xla_flags == (FUSION,) and record.xla_flags_applied  # the worker's own

    refused = run_cell_in_worker(_cell("typo"), QUICK, 300, probes=False)
    assert refused.status == "failed"
    assert refused.error.splitlines() == [
        "backend 'typo' declares XLA flag "
        "--xla_backend_extra_options=xla_cpu_use_multi_output_fusionn: backend option "
        "xla_cpu_use_multi_output_fusionn is not in the installed jaxlib (XLA would ignore "
        "it silently)"
    ]


def test_the_report_marks_the_backend_and_lists_its_flags(tmp_path):
    out, md = tmp_path / "r.json", tmp_path / "r.md"
    code = main(
        ["run", "--scenario", FLAGGED, "--backend", "plain", "--backend", "fused",
         "--size", "smoke", "--max-time", "0.2", "--no-probes", "--quiet",
         "--out", str(out), "--md", str(md)]
    )  # fmt: skip
    assert code == 0
    text = md.read_text()
    assert "| fused +xla " in text and "| plain " in text
    assert f"fused +xla ran with the XLA flags declared by the backend: {FUSION}" in text
    stored = json.loads(out.read_text())["records"]
    assert [r["xla_flags"] for r in stored] == [[], [FUSION]]


def test_in_process_measurement_says_the_flags_were_not_applied():
    from scanbench.execution.worker import Target, measure

    scenario = load(FLAGGED)
    fused, size = scenario.backend("fused"), scenario.size("smoke")
    record = measure(
        scenario, fused, size, Target("float32"), QUICK, probes=False, configure_x64=False
    )  # this process keeps its x64 setting (conftest)
    assert record.status == "ok", record.error
    assert record.xla_flags == (FUSION,) and not record.xla_flags_applied


def test_the_gates_worker_starts_with_the_backends_flags():
    scenario = load(FLAGGED)
    rule = BaselineRule(FLAGGED, "fused", "smoke", 0.1, 1e-5, "float32")
    with ServedCell(rule, Side(Path.cwd()), 300) as worker:
        facts, why = worker.explain()
    assert not why and FUSION in facts.environment["XLA_FLAGS"]
    assert scenario.backend("fused").xla_flags == (FUSION,)


def test_far_from_its_limit_a_jax_cell_is_told_to_try_the_flags():
    base = {
        "median_s": 0.05,
        "per_call": {"dispatches": 1, "h2d": 0, "host_conversions": 0, "compiles": 0},
        "decomposition": {"device_fraction": 0.95, "host_fraction": 0.05},
    }
    far = diagnose(Facts(**base, x_roofline=4.3))
    (finding,) = [f for f in far if f.cost == Cost.FAR]
    assert finding.evidence == "4.3x the roofline kernel per core"
    assert "scanbench flags" in finding.fix
    assert Cost.FAR not in [f.cost for f in diagnose(Facts(**base, x_roofline=1.9))]
    numba = diagnose(Facts(**base, x_roofline=4.3, engine="numba"))
    assert Cost.FAR not in [f.cost for f in numba]
    loop = {**base, "per_call": {"dispatches": 400}, "decomposition": {"dispatch_fraction": 0.9}}
    loop["costs"] = {"dispatch_queued_s": 5e-6}
    dispatch_bound = diagnose(Facts(**loop, x_roofline=4.3))
    assert dispatch_bound[0].cost == Cost.DISPATCH  # move the loop first, not other options
    assert Cost.FAR not in [f.cost for f in dispatch_bound]


def test_candidates_are_listed_per_platform_and_unknown_names_refused(capsys):
    assert {c.name for c in flag_search.candidates("cpu")} >= {
        "multi-output-fusion", "small-while-loops", "concurrency-scheduler",
        "no-fusion-emitters", "one-codegen-part", "vector-width-512", "xnn-eltwise",
    }  # fmt: skip
    assert "no-command-buffers" in {c.name for c in flag_search.candidates("cuda")}
    with pytest.raises(UnknownNameError, match="unknown candidate 'nope'"):
        flag_search.candidates("cpu", ["nope"])
    assert main(["flags", "--list", "--platform", "gpu"]) == 0
    assert "latency-hiding-scheduler" in capsys.readouterr().out
    assert main(["flags", "--platform", "cpu", "--candidate", "nope", "--scenario", FLAGGED]) == 2
    assert "unknown candidate 'nope'" in capsys.readouterr().err


def test_every_curated_cpu_candidate_is_taken_by_the_installed_jaxlib():
    flags = [flag for c in flag_search.candidates("cpu") for flag in c.flags]
    assert refusals(flags).refused == {}


@pytest.mark.slow
def test_the_search_finds_the_faster_flags_and_their_line(tmp_path, monkeypatch):
    """A: fusion off (the TDMA time-major scan launches every elementwise op, about 2x
    slower); the candidates that turn it on again are faster, together too; one the
    backend's environment already sets is skipped, an unknown one listed as refused."""
    Candidate = flag_search.Candidate
    monkeypatch.setitem(
        flag_search.CANDIDATES,
        "cpu",
        (
            Candidate("fusion-on", ("--xla_disable_hlo_passes=",), "fusion again"),
            Candidate(
                "fusion-on-ftz", ("--xla_disable_hlo_passes=", "--xla_cpu_ftz=true"), "and ftz"
            ),
            Candidate("already", ("--xla_cpu_enable_fast_min_max=true",), "set by A"),
            Candidate("bogus", ("--xla_cpu_no_such_flag=1",), "refused"),
        ),
    )
    md = tmp_path / "flags.md"
    gates = tmp_path / "gates.toml"
    gates.write_text("[settings]\nblocks = 8\nsamples_per_block = 5\nworker_pairs = 1\n")
    code = main(
        ["flags", "--scenario", "tridiagonal", "--backend", "scanned-time-major",
         "--size", "smoke", "--gates", str(gates), "--md", str(md),
         "--env", "XLA_FLAGS=--xla_disable_hlo_passes=fusion --xla_cpu_enable_fast_min_max=true"]
    )  # fmt: skip
    assert code == 0
    text = md.read_text()
    assert "bogus (--xla_cpu_no_such_flag=1: unknown to the installed jaxlib)" in text
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    assert "already set" in rows["already"]
    for name in ("fusion-on", "fusion-on-ftz", "together"):
        assert "| faster " in rows[name], rows[name]
        assert "kernels 1,108 -> " not in rows[name]  # A is unfused: more kernels than B
    use = text.split("```bash\n")[1].splitlines()[0]  # the best single one: same effect
    assert use.startswith("XLA_FLAGS='--xla_cpu_enable_fast_min_max=true --xla_disable_hlo_passes=")

"""The advice to look at a trace names the call that writes one where the reader is, and
`scanbench.profile(..., trace=...)` writes the trace it names."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import scanbench
from scanbench.diagnosis import Cost, Facts, diagnose
from scanbench.invocation import NotebookCall
from scanbench.reports.frame import trace_route
from scanbench.results import load_run
from scanbench.sampling import TimingConfig
from scanbench.trace_route import TraceRoute
from tests.support.paths import DATA

QUICK = TimingConfig(warmup=0, min_time_s=0.0, min_count=1, max_time_s=0.2)
COSTS = {"dispatch_queued_s": 11e-6, "kernel_launch_s": 40e-9}


def not_known(route: TraceRoute) -> str:
    """The fix of a cell no count explains (device 85%: no rule fires)."""
    decomposition = {"dispatch_fraction": 0.01, "device_fraction": 0.85, "host_fraction": 0.05}
    facts = Facts(0.0856, {"dispatches": 1}, decomposition=decomposition, costs=COSTS)
    (first, *_) = diagnose(dataclasses.replace(facts, trace_route=route))
    assert first.cost == Cost.UNKNOWN
    return first.fix


def unexplained(route: TraceRoute) -> str:
    """The fix of a JAX cell whose host time no count explains."""
    decomposition = {"device_fraction": 0.1, "host_fraction": 0.7}
    facts = Facts(0.016, {"dispatches": 1}, decomposition=decomposition, costs=COSTS)
    (first, *_) = diagnose(dataclasses.replace(facts, trace_route=route))
    assert first.cost == Cost.UNEXPLAINED
    return first.fix


CELL = "scanbench profile --scenario tridiagonal --backend scanned --size smoke --dtype float64"


@pytest.mark.parametrize(
    "route, said",
    [
        (TraceRoute(), "`scanbench profile`"),
        (TraceRoute.command("tridiagonal", "scanned", "smoke", "float64"), f"`{CELL}`"),
        (TraceRoute.python("loop"), "`scanbench.profile(loop, *args, trace=True)`"),
        (TraceRoute.python("my loop"), "`scanbench.profile(fn, *args, trace=True)`"),
        (TraceRoute.at("/tmp/trace"), "the trace at /tmp/trace"),
    ],
)
def test_the_advice_names_the_call_that_works_where_the_reader_is(route, said):
    for fix in (not_known(route), unexplained(route)):
        assert said in fix
        if route.written:  # the trace is written: no call to run again
            assert "scanbench profile" not in fix and "scanbench.profile" not in fix


def test_a_run_cell_names_the_command_and_a_compare_row_the_python_call():
    run = load_run(DATA / "tdma.json")  # a `scanbench run`: its cells' command
    record = run.records[0]
    call = trace_route(run, record).call
    assert call.startswith("scanbench profile --scenario ")
    assert f"--backend {record.backend} --size {record.size} --dtype {record.dtype}" in call
    origin = NotebookCall("scanbench.notebook.compare", "in-process", "rtol", QUICK)
    invocation = dataclasses.replace(run.invocation, origin=origin)
    notebook = dataclasses.replace(run, invocation=invocation)
    loop = dataclasses.replace(record, backend="loop")  # compare's name for the function
    assert trace_route(notebook, loop).call == "scanbench.profile(loop, *args, trace=True)"
    for param in ("x", 2):  # --param values of a swept backend are named too
        swept = dataclasses.replace(record, params={"block": param})
        assert f"--param block={param}" in trace_route(run, swept).call


def step(carry, x):
    return carry + jnp.sin(x), carry


@jax.jit
def scan(xs):
    return jax.lax.scan(step, 0.0, xs)[0]


@pytest.mark.parametrize("isolate", [False, True])
def test_profile_writes_the_trace_it_names(tmp_path, isolate):
    measured = scanbench.profile(
        scan, jnp.arange(50.0), trace=tmp_path / "trace", timing=QUICK, isolate=isolate
    )
    files = measured.trace
    assert files is not None and files.directory == str((tmp_path / "trace").resolve())
    assert files.perfetto and Path(files.perfetto).is_file()
    assert list((tmp_path / "trace").rglob("*.xplane.pb"))  # XProf's
    text = measured.text()
    assert files.perfetto in text and f"--logdir {files.directory}" in text
    assert "top 5 kernels by count:" in text
    if not isolate:  # a jitted function unpickled in a worker cannot be lowered: no loops
        assert "scan: loop while" in text and " x50: " in text and "kernels per iteration" in text
    assert "scanbench profile" not in text and "scanbench.profile" not in text


def test_profile_without_a_trace_says_how_to_ask_for_one():
    measured = scanbench.profile(scan, jnp.arange(50.0), timing=QUICK)
    assert measured.trace is None and "trace of one call" not in measured.text()
    for finding in measured.diagnosis:  # a trace named is Python's, never the command
        assert "scanbench profile" not in finding.fix


def test_a_trace_option_of_another_kind_is_refused():
    with pytest.raises(scanbench.InputError, match="trace=3: give a folder"):
        scanbench.profile(scan, jnp.arange(50.0), trace=3, timing=QUICK)

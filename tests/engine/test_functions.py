"""The Python API (`scanbench.compare`, `profile`, `report`) and the `scanbench` pytest
fixture: a user's own functions, measured as the harness measures its backends."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scanbench import compare, profile, report
from scanbench.api import InputError
from scanbench.diagnosis import Cost
from scanbench.sampling import TimingConfig
from tests.conftest import outer_pytest_free
from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
QUICK = TimingConfig(warmup=0, min_time_s=0.0, min_count=3, max_time_s=0.3)
NOTEBOOK = """\
import jax
import jax.numpy as jnp
import numpy as np

from scanbench import compare, profile, report


def step(c, x):
    return 0.9 * c + x


jitted_step = jax.jit(step)


def loop(xs):  # one jitted call per row, from Python
    c = jnp.zeros(xs.shape[1:])
    for x in xs:
        c = jitted_step(c, x)
    return c


@jax.jit
def scan(xs):  # the whole loop in one call
    return jax.lax.scan(lambda c, x: (step(c, x), None), jnp.zeros(xs.shape[1:]), xs)[0]


@jax.jit
def vmap(xs):  # the closed form, vectorised over the rows
    weights = 0.9 ** jnp.arange(xs.shape[0] - 1, -1, -1, dtype=xs.dtype)
    return jax.vmap(jnp.multiply, in_axes=(0, 0))(weights, xs).sum(axis=0)


xs = jnp.asarray(np.random.default_rng(0).standard_normal((200, 1000)), jnp.float32)
table = compare({"loop": loop, "vmap": vmap, "scan": scan}, xs, reference="loop", rtol=1e-4)
print(table[["median_s", "speedup", "dispatches", "h2d", "max_error"]])
print(table.loc["loop", "diagnosis"])
print(profile(scan, xs).text())
markdown = report(table, md="results/notebook.md", html="results/notebook.html")
"""


@pytest.mark.solo  # the diagnosis reads measured shares: the other xdist worker skews them
def test_a_notebook_session_compares_profiles_and_reports(tmp_path, monkeypatch, capsys):
    """Loop, vmap and scan of one recurrence, as a user's notebook would write them."""
    block = NOTEBOOK
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").mkdir()
    namespace: dict = {}
    exec(compile(block, "notebook", "exec"), namespace)
    table = namespace["table"]
    assert list(table.index) == ["loop", "vmap", "scan"]
    assert (table["status"] == "ok").all() and table.loc["loop", "speedup"] == 1.0
    assert table.loc["scan", "dispatches"] == 1 and table.loc["loop", "dispatches"] >= 200
    assert table.loc["scan", "speedup"] > 1 and table.loc["vmap", "speedup"] > 1
    # the cores each really used and whether its timing was disturbed, as the report says
    assert (table["cores"] > 0).all() and table["disturbed"].isin([True, False]).all()
    # which rule leads depends on the measured shares (the device thread busy with ~10 us
    # executions, the host dispatching them, or, in a slow spell of this VM, host time no
    # probe names: "no dominant overhead ... (also: dispatch-bound, many small
    # executions)", 1 of 8 runs once); every time the loop's dispatches are named
    loop = table.loc["loop", "diagnosis"]
    assert "dispatch-bound" in loop or "many small executions" in loop, loop
    assert "dispatch-bound" not in table.loc["scan", "diagnosis"]
    assert "no worker isolation" in table.attrs["isolation"]
    assert "## functions / default" in (tmp_path / "results" / "notebook.md").read_text()
    assert "<img" in (tmp_path / "results" / "notebook.html").read_text()
    assert "dispatch-bound" in capsys.readouterr().out


def square_sum(x):
    return jnp.sum(x * x, axis=1)


def test_a_wrong_or_nan_function_fails_loudly_and_is_not_timed():
    x = jnp.ones((64, 32), jnp.float32)
    wrong = jax.jit(lambda x: jnp.sum(x * x, axis=1) + 1e-3)
    nan = jax.jit(lambda x: jnp.sum(x * x, axis=1) * jnp.nan)
    table = compare(
        {"loop": square_sum, "vmap_wrong": wrong, "vmap_nan": nan},
        x,
        timing=QUICK,
        probes=False,
    )
    assert table.loc["loop", "status"] == "ok"
    assert table.loc["vmap_wrong", "status"] == "failed"
    assert "differs from the reference's" in table.loc["vmap_wrong", "error"]
    assert "NaN or inf" in table.loc["vmap_nan", "error"]
    assert np.isnan(table.loc["vmap_wrong", "median_s"])  # never timed


def test_names_that_say_no_strategy_must_be_given_one():
    with pytest.raises(InputError, match="strategies=\\{'mine': 'scanned'\\}"):
        compare({"mine": square_sum}, jnp.ones((4, 4)), probes=False)
    with pytest.raises(InputError, match="reference 'nope' is not one of the functions"):
        compare({"loop": square_sum}, jnp.ones((4, 4)), reference="nope")
    table = compare(
        {"mine": square_sum},
        jnp.ones((4, 4)),
        strategies={"mine": "vmapped"},
        timing=QUICK,
        probes=False,
    )
    assert table.loc["mine", "strategy"] == "vmapped"


def test_the_users_x64_setting_is_left_as_it_is():
    before = jax.config.jax_enable_x64
    compare({"loop": square_sum}, np.ones((4, 4), np.float32), timing=QUICK, probes=False)
    assert jax.config.jax_enable_x64 == before


def test_profile_returns_counts_dispatches_by_function_and_a_diagnosis():
    jitted = jax.jit(square_sum)

    def loop(x):
        return jnp.stack([jitted(row[None])[0] for row in x])

    result = profile(loop, jnp.ones((16, 8), jnp.float32), strategy="sequential", timing=QUICK)
    assert result.counts["dispatches"] >= 16
    assert any("square_sum" in name for name in result.dispatches_by_function)
    assert result.diagnosis and result.diagnosis[0].cost in set(Cost)
    assert "dispatches by function" in result.text()


def test_isolated_functions_run_in_workers_and_unpicklable_ones_are_refused():
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    table = compare({"loop": square_sum}, x, timing=QUICK, probes=False, isolate=True)
    assert table.loc["loop", "status"] == "ok", table.loc["loop", "error"]
    assert table.attrs["isolation"] == "one fresh worker process per function"
    lock = threading.Lock()

    def locked(x):
        with lock:
            return square_sum(x)

    with pytest.raises(InputError, match="cannot be pickled"):
        compare({"loop": locked}, x, timing=QUICK, probes=False, isolate=True)


def test_report_takes_a_table():
    with pytest.raises(InputError, match="takes the DataFrame that compare"):
        report(object())


def test_the_pytest_fixture_puts_counts_in_extra_info(tmp_path):
    test = tmp_path / "test_mine.py"
    test.write_text(
        textwrap.dedent(
            """
            import jax, jax.numpy as jnp

            @jax.jit
            def scan(xs):
                return jax.lax.scan(lambda c, x: (c + x, None), jnp.zeros(4), xs)[0]

            def test_scan_is_one_dispatch(scanbench):
                result = scanbench(scan, jnp.ones((10, 4)), strategy="scanned")
                assert result.counts["dispatches"] <= 1 and result.counts["h2d"] == 0
            """
        )
    )
    out = tmp_path / "bench.json"
    command = [
        sys.executable, "-m", "pytest", str(test), "-q", "-p", "no:cacheprovider",
        "--benchmark-max-time", "0.05", "--benchmark-json", str(out),
    ]  # fmt: skip
    result = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env=outer_pytest_free(),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    (bench,) = json.loads(out.read_text())["benchmarks"]
    assert bench["extra_info"]["counts_per_call"]["dispatches"] == 1
    assert bench["extra_info"]["backend"] == "scan"
    # compiled cold (the caches cleared), its time to a first result by JAX's stages
    info = bench["extra_info"]
    stages = info["compile_stages"]
    assert stages["prepare"]["compile_s"] > 0 and stages["prepare"]["compiles"] >= 1
    assert stages["prepare"]["trace_s"] > 0 and stages["prepare"]["lower_s"] > 0
    spent = sum(stages["prepare"][k] for k in ("trace_s", "lower_s", "compile_s", "rest_s"))
    assert spent == pytest.approx(info["prepare_s"], rel=1e-6)


MARKED = """
import jax, jax.numpy as jnp, pytest

@jax.jit
def scan(xs):
    return jax.lax.scan(lambda c, x: (c + x, None), jnp.zeros(4), xs)[0]

@pytest.mark.scanbench(name="summed", strategy="scanned")
def test_marked(scanbench):
    result = scanbench(scan, jnp.ones((10, 4)))
    info = result.extra_info
    assert info["backend"] == "summed" and info["strategy"] == "scanned", info
    assert info["compiled_cold"] is COLD
    assert ("not_timed" in info) is UNDER_XDIST and result.counts["dispatches"] == 1
"""


def _pytest(tmp_path, test, *options):
    command = [sys.executable, "-m", "pytest", str(test), "-q", "-p", "no:cacheprovider"]
    return subprocess.run(
        [*command, *options], cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env=outer_pytest_free(),
    )  # fmt: skip


def test_the_fixture_takes_a_marker_an_option_and_counts_under_xdist(tmp_path):
    """``pytest --help`` shows the option and ``--markers`` the marker; the marker gives
    the defaults; ``--scanbench-warm`` keeps the caches; under pytest-xdist nothing is
    timed (pytest-benchmark disables itself), the counts are exact and it says so."""
    helped = _pytest(tmp_path, tmp_path, "--help")
    assert "--scanbench-warm" in helped.stdout, helped.stdout[-2000:]
    markers = _pytest(tmp_path, tmp_path, "--markers")
    assert "@pytest.mark.scanbench(name=None, strategy=None)" in markers.stdout
    warm = tmp_path / "test_warm.py"
    warm.write_text(MARKED.replace("COLD", "False").replace("UNDER_XDIST", "False"))
    done = _pytest(tmp_path, warm, "--scanbench-warm", "--benchmark-max-time", "0.05")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    spread = tmp_path / "test_spread.py"
    spread.write_text(MARKED.replace("COLD", "True").replace("UNDER_XDIST", "True"))
    done = _pytest(tmp_path, spread, "-n", "2")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def test_compare_gives_the_time_to_a_first_result_by_jaxs_stages():
    """A jitted function already compiled in the user's session is compiled cold again:
    its XLA compile, tracing and lowering are timed apart, within its compile time."""
    xs = jnp.ones((64, 32), jnp.float32)
    scan = jax.jit(lambda v: jax.lax.scan(lambda c, x: (c * 0.5 + x, None), v[0], v)[0])
    scan(xs).block_until_ready()  # warm in this process: compare() must not see it warm
    table = compare({"scan": scan}, xs, strategies={"scan": "scanned"}, timing=QUICK)
    row = table.loc["scan"]
    assert row["compile_xla_s"] > 0 and row["compile_trace_s"] > 0 and row["compile_lower_s"] > 0
    stages = row["compile_trace_s"] + row["compile_lower_s"] + row["compile_xla_s"]
    assert stages <= row["compile_s"] + row["first_call_s"] + 1e-6


def test_a_row_without_an_interval_is_noted_whatever_its_samples():
    """Five samples give no 95% interval (six do): the note says so, as for one."""
    from types import SimpleNamespace

    from scanbench.notebook import notes

    assert notes(SimpleNamespace(samples=1, rel_width=float("nan"))).startswith("n=1: no interval")
    assert notes(SimpleNamespace(samples=5, rel_width=float("nan"))).startswith("n=5: no interval")
    assert notes(SimpleNamespace(samples=6, rel_width=0.4)) == ""
    assert notes(SimpleNamespace(samples=float("nan"), rel_width=float("nan"))) == ""

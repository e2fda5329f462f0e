"""The tridiagonal scenario: reference, check, work, and agreement between JAX backends."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from scanbench.api import MismatchError
from scanbench.scenarios.tridiagonal import SCENARIO
from scanbench.scenarios.tridiagonal.problem import Diagonals
from scanbench.scenarios.tridiagonal.reference import TOLERANCE, gtsv_solve, residual
from scanbench.scenarios.tridiagonal.sequential import numpy_sweep
from tests.conftest import scenario_case

JAX_STRATEGIES = ("sequential", "vmapped", "scanned")


def test_inputs_are_seeded_and_diagonally_dominant():
    size = SCENARIO.size("smoke")
    first = SCENARIO.make_inputs(size, 7, "float64")
    again = SCENARIO.make_inputs(size, 7, "float64")
    other = SCENARIO.make_inputs(size, 8, "float64")
    for x, y in zip(first, again, strict=True):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(first.d, other.d)
    a, b, c, _ = first
    assert np.all(np.abs(b) >= np.abs(a) + np.abs(c) + 1.0)
    assert np.all(a[:, 0] == 0) and np.all(c[:, -1] == 0)
    assert first.a.shape == (1_000, 100)
    assert SCENARIO.make_inputs(size, 7, "float32").b.dtype == np.float32


def test_reference_has_tiny_residual_and_matches_the_thomas_sweep():
    _, _, inputs, expected = scenario_case("tridiagonal", "float64")
    assert residual(inputs, expected) < 1e-13
    np.testing.assert_allclose(numpy_sweep(inputs), expected, rtol=0, atol=1e-12)


def test_check_rejects_wrong_answers():
    *_, expected = scenario_case("tridiagonal", "float64")
    good = expected.copy()
    assert SCENARIO.check(good, expected, "float64") == 0.0
    wrong = good.copy()
    wrong[3, 5] += 1e-6
    with pytest.raises(MismatchError, match="system 3, row 5") as info:
        SCENARIO.check(wrong, expected, "float64")
    assert info.value.tolerance == TOLERANCE["float64"]
    scale = max(1.0, np.abs(expected).max())
    assert info.value.max_error == pytest.approx(1e-6 / scale, rel=1e-3)
    nan = good.copy()
    nan[0, 0] = np.nan
    with pytest.raises(MismatchError, match="non-finite"):
        SCENARIO.check(nan, expected, "float64")
    with pytest.raises(MismatchError, match="shape"):
        SCENARIO.check(good.T, expected, "float64")
    with pytest.raises(MismatchError, match="dtype float32, expected float64"):
        SCENARIO.check(good.astype(np.float32), expected, "float64")


def test_gtsv_in_float32_stays_float32():
    _, _, inputs, expected = scenario_case("tridiagonal", "float32")
    x = gtsv_solve(inputs)
    assert x.dtype == np.float32
    SCENARIO.check(x, expected, "float32")


def test_work_counts_minimum_traffic():
    work = SCENARIO.work(SCENARIO.size("default"), "float64")
    assert work["systems"] == 100_000
    assert work["bytes"] == 5 * 100_000 * 100 * 8


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_jax_sequential_vmapped_and_scanned_agree(dtype):
    """They compute the same thing: same Thomas recurrence, same inputs."""
    _, size, inputs, _ = scenario_case("tridiagonal", dtype)
    outputs = {}
    for backend in SCENARIO.backends.values():
        if backend.engine == "jax" and backend.strategy in JAX_STRATEGIES:
            prepared = backend.prepare(inputs, size)
            outputs[backend.name] = np.asarray(
                backend.to_reference(jax.block_until_ready(backend.run(prepared)))
            )
    assert {"sequential-jax", "vmapped", "scanned-issue", "scanned-time-major"} <= set(outputs)
    first = outputs.pop("sequential-jax")
    tolerance = {"float64": 1e-13, "float32": 1e-5}[dtype]
    for name, output in outputs.items():
        np.testing.assert_allclose(output, first, rtol=0, atol=tolerance, err_msg=name)


def test_time_major_layout_round_trips():
    from scanbench.scenarios.tridiagonal.scanned import from_time_major, to_time_major

    _, _, inputs, _ = scenario_case("tridiagonal", "float64")
    time_major = to_time_major(inputs)
    assert isinstance(time_major, Diagonals)
    assert time_major.a.shape == (100, 1_000) and time_major.a.flags.c_contiguous
    np.testing.assert_array_equal(from_time_major(time_major.d), inputs.d)


@pytest.mark.parametrize("block", [1, 300, 1000, 4096])
def test_blocked_solver_handles_blocks_that_do_not_divide_the_batch(block):
    """The last block is shifted back to end at the batch (its start clamped): a few
    systems are solved twice, with the same answer; a block larger than the batch is the
    whole batch."""
    from scanbench.scenarios.tridiagonal.blocked import blocked_kernel
    from scanbench.scenarios.tridiagonal.scanned import from_time_major, to_time_major

    _, _, inputs, expected = scenario_case("tridiagonal", "float64")
    time_major = Diagonals(*(jax.device_put(v) for v in to_time_major(inputs)))
    solved = jax.jit(blocked_kernel, static_argnames="block")(time_major, block=block)
    np.testing.assert_allclose(from_time_major(solved), expected, rtol=0, atol=1e-12)


def test_loading_the_scenario_leaves_numba_and_scipy_linalg_unimported():
    """A cell's worker loads its scenario afresh: a JAX cell pays neither Numba's import
    nor SciPy's linalg (the reference is shared by the run's cells); a Numba backend
    imports its kernels when it first runs, and the reference imports LAPACK's."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from scanbench.sources import load\n"
        "scenario = load('scanbench.scenarios.tridiagonal:SCENARIO')\n"
        "before = sorted({'numba', 'scipy.linalg'} & set(sys.modules))\n"
        "inputs = scenario.make_inputs(scenario.size('smoke'), 0, 'float64')\n"
        "expected = scenario.reference(inputs)\n"
        "backend = scenario.backend('numba-serial')\n"
        "scenario.check(backend.run(backend.prepare(inputs, scenario.size('smoke'))), "
        "expected, 'float64')\n"
        "print(before, sorted({'numba', 'scipy.linalg'} & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] ['numba', 'scipy.linalg']", out.stdout + out.stderr

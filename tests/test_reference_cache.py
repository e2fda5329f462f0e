"""A reference executable is compiled once per run and loaded by later cells."""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scanbench.execution.reference_cache import (
    CACHE_ENV,
    PREFIX,
    compile_reference,
    remove_stale,
    run_cache,
)


class _NoCompile:
    """A lowered program that must not be compiled again (it was, by an earlier cell)."""

    def __init__(self, lowered):
        self.lowered = lowered

    def as_text(self):
        return self.lowered.as_text()

    def compile(self, *args, **kwargs):
        raise AssertionError("compiled again, not loaded from the run's folder")


def _lowered(scale: float = 2.0):
    return jax.jit(lambda x: jnp.sin(x) * scale).lower(jax.ShapeDtypeStruct((4,), jnp.float32))


def test_a_later_cell_loads_the_executable_instead_of_compiling(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    x = jnp.arange(4, dtype=jnp.float32)
    first = compile_reference(_lowered(), {"xla_backend_optimization_level": 0})
    assert len(list(tmp_path.glob("*.pickle"))) == 1
    loaded = compile_reference(_NoCompile(_lowered()), {"xla_backend_optimization_level": 0})
    np.testing.assert_array_equal(np.asarray(loaded(x)), np.asarray(first(x)))
    np.testing.assert_allclose(np.asarray(loaded(x)), np.sin(np.arange(4.0)) * 2, rtol=1e-6)


def test_another_program_options_or_flags_compile_their_own(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    compile_reference(_lowered(2.0))
    compile_reference(_lowered(3.0))  # another constant: another program
    compile_reference(_lowered(2.0), {"xla_backend_optimization_level": 0})
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
    with pytest.raises(AssertionError, match="compiled again"):
        compile_reference(_NoCompile(_lowered(2.0)))
    assert len(list(tmp_path.glob("*.pickle"))) == 3
    assert not list(tmp_path.glob("*.tmp"))  # written to a temp file, then renamed


def test_outside_a_run_nothing_is_kept(monkeypatch):
    monkeypatch.delenv(CACHE_ENV, raising=False)
    with pytest.raises(AssertionError, match="compiled again"):
        compile_reference(_NoCompile(_lowered()))


def test_a_run_names_its_folder_for_its_workers_and_removes_it(monkeypatch):
    monkeypatch.setenv(CACHE_ENV, "/elsewhere")
    with run_cache() as folder:
        assert os.environ[CACHE_ENV] == str(folder) and folder.is_dir()
    assert not folder.exists() and os.environ[CACHE_ENV] == "/elsewhere"


def test_the_folder_of_a_killed_run_is_removed_by_the_next_run(tmp_path):
    """A SIGKILLed run leaves its folder; the next removes it, and only it."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    dead = tmp_path / f"{PREFIX}{gone.stdout.strip()}-abc"
    (dead / "inner").mkdir(parents=True)
    live = tmp_path / f"{PREFIX}{os.getpid()}-def"  # a running run's folder
    other = tmp_path / f"{PREFIX}notapid"  # not ours to judge
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / f"{PREFIX}999999999-link"  # never followed
    for folder in (live, other):
        folder.mkdir()
    link.symlink_to(target, target_is_directory=True)
    assert remove_stale(tmp_path) == [dead]
    assert not dead.exists() and live.is_dir() and other.is_dir() and link.is_symlink()
    assert target.is_dir()


def test_a_run_folder_names_its_pid(monkeypatch):
    monkeypatch.delenv(CACHE_ENV, raising=False)
    with run_cache() as folder:
        assert folder.name.startswith(f"{PREFIX}{os.getpid()}-")

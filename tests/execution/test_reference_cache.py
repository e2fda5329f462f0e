"""A reference executable is compiled once per run and loaded by later cells."""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scanbench.api import InputError
from scanbench.compile_cache import CACHE_ENV as COMPILE_CACHE_ENV
from scanbench.execution.reference_cache import (
    CACHE_ENV,
    PREFIX,
    compile_reference,
    remove_stale,
    run_cache,
    shared_reference,
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


@pytest.fixture
def no_compile_cache(monkeypatch):
    """JAX's persistent compilation cache off: the run's folder keeps the executables."""
    monkeypatch.setenv(COMPILE_CACHE_ENV, "off")


def test_a_later_cell_loads_the_executable_instead_of_compiling(
    tmp_path, monkeypatch, no_compile_cache
):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    x = jnp.arange(4, dtype=jnp.float32)
    first = compile_reference(_lowered(), {"xla_backend_optimization_level": 0})
    assert len(list(tmp_path.glob("*.pickle"))) == 1
    loaded = compile_reference(_NoCompile(_lowered()), {"xla_backend_optimization_level": 0})
    np.testing.assert_array_equal(np.asarray(loaded(x)), np.asarray(first(x)))
    np.testing.assert_allclose(np.asarray(loaded(x)), np.sin(np.arange(4.0)) * 2, rtol=1e-6)


def test_another_program_options_or_flags_compile_their_own(
    tmp_path, monkeypatch, no_compile_cache
):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    compile_reference(_lowered(2.0))
    compile_reference(_lowered(3.0))  # another constant: another program
    compile_reference(_lowered(2.0), {"xla_backend_optimization_level": 0})
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
    with pytest.raises(AssertionError, match="compiled again"):
        compile_reference(_NoCompile(_lowered(2.0)))
    assert len(list(tmp_path.glob("*.pickle"))) == 3
    assert not list(tmp_path.glob("*.tmp"))  # written to a temp file, then renamed


def test_outside_a_run_nothing_is_kept(monkeypatch, no_compile_cache):
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


class _Counting:
    """A scenario whose reference counts its calls (and may return what cannot be pickled)."""

    def __init__(self, name: str = "counting", picklable: bool = True):
        self.name = name
        self.calls = 0
        self.picklable = picklable

    def reference(self, inputs):
        self.calls += 1
        solution = np.cumsum(inputs["x"]) * 2.0
        return solution if self.picklable else (solution, lambda: None)


def test_a_reference_is_computed_once_per_run_for_the_same_inputs(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    scenario = _Counting()
    inputs = {"x": np.arange(1000, dtype=np.float64)}
    first = shared_reference(scenario, inputs)
    again = shared_reference(scenario, {"x": np.arange(1000, dtype=np.float64)})
    assert scenario.calls == 1  # the second cell loaded the first cell's reference
    np.testing.assert_array_equal(again, first)
    np.testing.assert_array_equal(again, np.cumsum(np.arange(1000.0)) * 2.0)
    assert len(list(tmp_path.glob("reference-*.pickle"))) == 1
    assert not list(tmp_path.glob("*.tmp"))  # written to a temp file, then renamed


def test_other_inputs_or_scenarios_get_their_own_reference(tmp_path, monkeypatch):
    """The key is the inputs' bytes: one changed element is another reference."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    scenario, other = _Counting(), _Counting("other")
    inputs = {"x": np.arange(1000, dtype=np.float64)}
    changed = {"x": np.arange(1000, dtype=np.float64)}
    changed["x"][500] = -1.0
    shared_reference(scenario, inputs)
    got = shared_reference(scenario, changed)
    shared_reference(other, inputs)
    assert scenario.calls == 2 and other.calls == 1
    np.testing.assert_array_equal(got, np.cumsum(changed["x"]) * 2.0)
    assert len(list(tmp_path.glob("reference-*.pickle"))) == 3


def test_what_cannot_be_pickled_is_computed_in_every_cell(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    scenario = _Counting(picklable=False)
    inputs = {"x": np.arange(10.0)}
    for _ in range(2):
        shared_reference(scenario, inputs)
    unpicklable_inputs = {"x": np.arange(10.0), "f": lambda: None}
    for _ in range(2):
        shared_reference(_Counting(), unpicklable_inputs)
    assert scenario.calls == 2 and not list(tmp_path.iterdir())


def test_outside_a_run_every_reference_is_computed(monkeypatch):
    monkeypatch.delenv(CACHE_ENV, raising=False)
    scenario = _Counting()
    for _ in range(2):
        shared_reference(scenario, {"x": np.arange(10.0)})
    assert scenario.calls == 2


def test_a_kept_reference_writable_by_others_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    shared_reference(_Counting(), {"x": np.arange(10.0)})
    (kept,) = tmp_path.glob("reference-*.pickle")
    kept.chmod(0o666)
    with pytest.raises(InputError, match="group or others can write it"):
        shared_reference(_Counting(), {"x": np.arange(10.0)})


def test_with_the_persistent_cache_a_later_cell_compiles_nothing(tmp_path, monkeypatch):
    """With JAX's persistent cache on, the reference comes from it: an earlier cell (or
    run) compiled it, and the run's folder keeps nothing."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "run"))
    (tmp_path / "run").mkdir(mode=0o700)
    monkeypatch.setenv(COMPILE_CACHE_ENV, str(tmp_path / "jax"))
    events: list[str] = []

    def listen(event: str, **kwargs) -> None:
        events.append(event)

    jax.monitoring.register_event_listener(listen)
    try:
        x = jnp.arange(4, dtype=jnp.float32)
        first = compile_reference(_lowered(5.0), {"xla_backend_optimization_level": 0})
        assert "/jax/compilation_cache/cache_misses" in events
        events.clear()
        loaded = compile_reference(_lowered(5.0), {"xla_backend_optimization_level": 0})
        assert "/jax/compilation_cache/cache_hits" in events
    finally:
        jax.monitoring.unregister_event_listener(listen)
    np.testing.assert_array_equal(np.asarray(loaded(x)), np.asarray(first(x)))
    assert not list((tmp_path / "run").iterdir())

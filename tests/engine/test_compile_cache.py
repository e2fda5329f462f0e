"""Compiles nobody times come from JAX's persistent cache; measured compiles never do."""

from __future__ import annotations

import os
import stat

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scanbench.api import InputError
from scanbench.compile_cache import (
    CACHE_ENV,
    SETTINGS,
    folder,
    measured_cold,
    unmeasured,
)

HIT, MISS = "/jax/compilation_cache/cache_hits", "/jax/compilation_cache/cache_misses"


@pytest.fixture
def events():
    """The ``jax.monitoring`` events of the test, and JAX's cache settings put back."""
    from jax.experimental.compilation_cache import compilation_cache

    before = {name: getattr(jax.config, name) for name in SETTINGS}
    seen: list[str] = []

    def listen(event: str, **kwargs) -> None:
        seen.append(event)

    jax.monitoring.register_event_listener(listen)
    yield seen
    jax.monitoring.unregister_event_listener(listen)
    for name, value in before.items():
        jax.config.update(name, value)
    compilation_cache.reset_cache()


def _compile(scale: float):
    """A new function each time: only a persistent cache can spare its compile."""

    def f(x):
        return jax.lax.fori_loop(0, 4, lambda i, v: jnp.sin(v) * scale + jnp.cos(v), x)

    return jax.jit(f).lower(jnp.ones(8, jnp.float32)).compile()


def test_an_unmeasured_compile_is_cached_and_a_measured_one_never(tmp_path, monkeypatch, events):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "jax"))
    measured_cold()
    with unmeasured() as on:
        first = _compile(1.5)
    assert on and MISS in events and HIT not in events
    assert any(name.endswith("-cache") for name in os.listdir(tmp_path / "jax"))
    events.clear()
    with unmeasured():
        again = _compile(1.5)
    assert HIT in events  # the same program: loaded, not compiled
    x = jnp.arange(8, dtype=jnp.float32)
    np.testing.assert_array_equal(np.asarray(again(x)), np.asarray(first(x)))
    events.clear()
    _compile(1.5)  # after the block: cold again, though the entry is there
    assert HIT not in events and MISS not in events
    assert jax.config.jax_enable_compilation_cache is False


def test_measured_compiles_ignore_a_users_cache(tmp_path, monkeypatch, events):
    """A worker whose compile times are reported never reads JAX's cache, even one the
    user configured (``JAX_COMPILATION_CACHE_DIR``)."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "jax"))
    with unmeasured():
        _compile(2.5)
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "jax"))  # the user's
    jax.config.update("jax_enable_compilation_cache", True)
    measured_cold()
    events.clear()
    _compile(2.5)
    assert HIT not in events and MISS not in events


def test_the_cache_can_be_turned_off(monkeypatch, events):
    monkeypatch.setenv(CACHE_ENV, "off")
    assert folder() is None
    with unmeasured() as on:
        _compile(3.5)
    assert not on and HIT not in events and MISS not in events


def test_the_default_folder_is_made_private_under_the_cache_home(tmp_path, monkeypatch):
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    made = folder()
    assert made == tmp_path / "scanbench" / "jax" and made.is_dir()
    assert stat.S_IMODE(made.stat().st_mode) == 0o700


def test_a_folder_others_can_write_is_refused(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv(CACHE_ENV, str(shared))
    with pytest.raises(InputError, match=r"\$SCANBENCH_COMPILE_CACHE .*\(group or others"):
        folder()
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    monkeypatch.setenv(CACHE_ENV, str(link))
    with pytest.raises(InputError, match="symbolic link"):
        folder()

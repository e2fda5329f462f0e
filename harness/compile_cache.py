"""Compiles that are not measured come from a persistent cache; measured ones never do.

A cell's worker compiles programs whose compile time is reported (the backend's
``prepare``, its first call: *compile* and *first call* in the report) and programs whose
compile time nobody reads: the scenario's reference objective, a fresh prepare at the full
size to count a cell timed on part of its work and its plain call before the counted one,
the unit-cost probes of the environment worker. The second kind is taken from JAX's
persistent compilation cache (``jax_compilation_cache_dir``) inside `unmeasured`; the
first kind is compiled cold, always: `measured_cold` turns the cache off for the whole
worker (a ``JAX_COMPILATION_CACHE_DIR`` of the user's included), and `unmeasured` turns
it back off on the way out.

Numba's on-disk cache (``@njit(cache=True)``, what a competent engineer writes) is the same
kind of cache: a cell whose Numba backend found its functions there reported a cache load
as its *compile* (1.6 s for the cart-pole's Numba cell after the pendulum's had compiled
the same functions cold in 9.3 s, in one smoke run), so the figure depended on which cells
ran before. `numba_cold` gives a measuring worker an empty cache folder of its own
(``NUMBA_CACHE_DIR``, a user's included): every Numba compile it reports is a real one.

JAX decides once per process whether it uses the cache, at the first compile
(``compilation_cache.is_cache_used``); `unmeasured` therefore sets the flags and resets
that decision (``jax.experimental.compilation_cache.compilation_cache.reset_cache``) on the
way in and on the way out. Every compile is cached (``jax_persistent_cache_min_compile_
time_secs`` 0: JAX's default keeps only those above 1 s), in `folder`
(``$SCANBENCH_COMPILE_CACHE``, default ``~/.cache/scanbench/jax``; ``off`` turns it off),
capped at `MAX_BYTES` (least recently used entries evicted; JAX locks the folder with
``filelock`` for that, which also keeps two workers from reading a half-written entry).
The cache key is JAX's: the program, the compile options, the jax and jaxlib versions,
the device and the XLA flags, but not the program's metadata (source files and lines), so
a fresh clone of the same code finds the entries of another: an executable from the cache
prints the same optimized HLO as a fresh compile but for the metadata it was first
compiled with (`scanbench.probes.hlo`, which the static counts use, reads no metadata).

A cached executable is machine code loaded into the process: the folder is used only when
it is this user's and no one else can write it (`scanbench.ownership.check_owned`);
anything else is refused with one line.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from .ownership import check_owned

CACHE_ENV = "SCANBENCH_COMPILE_CACHE"
OFF = "off"
MAX_BYTES = 1 << 30  # 1 GiB: a smoke and a default run of every bundled scenario use ~40 MB


def folder() -> Path | None:
    """The persistent cache's folder (made private to this user if missing), or None when
    ``$SCANBENCH_COMPILE_CACHE`` is ``off``.

    Raises:
        InputError: the folder is a link, another user's, or writable by others.
    """
    named = os.environ.get(CACHE_ENV, "")
    if named.strip().lower() == OFF:
        return None
    if named:
        path = Path(named).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = Path(base, "scanbench", "jax")
    if not os.path.lexists(path):
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return check_owned(path, f"${CACHE_ENV}" if named else "the compilation cache")


def _reset() -> None:
    from jax.experimental.compilation_cache import compilation_cache

    compilation_cache.reset_cache()


def measured_cold() -> None:
    """Turn JAX's persistent compilation cache off in this process: every compile from
    here on is a real one (a worker whose compile times are reported calls it first)."""
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    _reset()


NUMBA_CACHE_ENV = "NUMBA_CACHE_DIR"


def numba_cold(environ: Mapping[str, str], scratch: Path) -> dict[str, str]:
    """``environ`` with Numba's on-disk cache in ``scratch``, a folder of the worker's own
    that starts empty and goes with it: the worker's Numba functions compile cold, as its
    JAX programs do (`measured_cold`), whatever ``NUMBA_CACHE_DIR`` said."""
    return {**environ, NUMBA_CACHE_ENV: str(scratch)}


SETTINGS = (
    "jax_compilation_cache_dir",
    "jax_persistent_cache_min_compile_time_secs",
    "jax_compilation_cache_max_size",
    "jax_enable_compilation_cache",
)


@contextlib.contextmanager
def unmeasured() -> Iterator[bool]:
    """Compiles inside the block read and write the persistent cache (yields whether it
    is on); after it, JAX's cache settings are what they were (in a worker: off, see
    `measured_cold`). Not for a block whose compile times are reported."""
    where = folder()
    if where is None:
        yield False
        return
    import jax

    before = {name: getattr(jax.config, name) for name in SETTINGS}
    ours = dict(zip(SETTINGS, (str(where), 0.0, MAX_BYTES, True), strict=True))
    for name, value in ours.items():
        jax.config.update(name, value)
    _reset()
    try:
        yield True
    finally:
        for name, value in before.items():
            jax.config.update(name, value)
        _reset()

"""A scenario's reference executable, compiled once per run and loaded by later cells.

Every cell runs in a fresh process and checks its backend against the scenario's
reference; when that reference is itself a compiled JAX program (the MPPI objective,
re-evaluated on each generation's reported candidate), every cell compiled it again:
0.65 s of each MPPI cell at `smoke`, 12 s of a smoke run. `compile_reference` keeps the
compiled executable (``jax.experimental.serialize_executable``) in a folder the runner
makes for the run (`run_cache`, in ``$SCANBENCH_REFERENCE_CACHE``) and later cells load it
(0.05 s). Only references use it: a backend's compile time is what the report shows, so
backends always compile. Outside a run (tests, `scanbench profile`) nothing is kept.

The key is the program itself (its lowered StableHLO text, constants included), the
compiler options, the jax and jaxlib versions, the platform, device kind and count,
``XLA_FLAGS`` and the x64 flag: a cell whose backend sets its own XLA flags, or runs on
8 virtual devices, gets its own entry.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..safe_files import write_bytes_atomic

CACHE_ENV = "SCANBENCH_REFERENCE_CACHE"


def compile_reference(lowered: Any, compiler_options: Mapping[str, Any] | None = None) -> Any:
    """``lowered.compile(compiler_options)``, or the executable an earlier cell of the run
    compiled from the same program (see the module doc)."""
    options = dict(compiler_options or {})
    directory = os.environ.get(CACHE_ENV)
    if not directory:
        return lowered.compile(options)
    from jax.experimental import serialize_executable

    path = Path(directory) / f"{_key(lowered, options)}.pickle"
    if path.is_file():
        serialized, in_tree, out_tree = pickle.loads(path.read_bytes())
        return serialize_executable.deserialize_and_load(serialized, in_tree, out_tree)
    compiled = lowered.compile(options)
    # a temp file, then rename: a later cell sees the whole file or none
    write_bytes_atomic(path, pickle.dumps(serialize_executable.serialize(compiled)))
    return compiled


def _key(lowered: Any, options: Mapping[str, Any]) -> str:
    import jax
    import jaxlib

    device = jax.devices()[0]
    parts = [
        lowered.as_text(),
        repr(sorted(options.items())),
        jax.__version__,
        jaxlib.__version__,
        device.platform,
        device.device_kind,
        str(jax.device_count()),
        os.environ.get("XLA_FLAGS", ""),
        str(jax.config.jax_enable_x64),
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


PREFIX = "scanbench-reference-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale(parent: Path | None = None) -> list[Path]:
    """Remove the folders of runs that died without removing theirs (a SIGKILLed run:
    nothing in the process can clean up after SIGKILL): ``scanbench-reference-<pid>-*``
    folders of this user whose run ``<pid>`` is gone. Folders of live processes,
    symlinks, other users' folders and anything else in ``parent`` are left alone."""
    parent = Path(parent or tempfile.gettempdir())
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            pid_text = entry.name[len(PREFIX) :].split("-", 1)[0]
            if not (entry.name.startswith(PREFIX) and pid_text.isdigit()):
                continue
            with contextlib.suppress(OSError):
                owned = entry.stat(follow_symlinks=False).st_uid == os.getuid()
                if entry.is_dir(follow_symlinks=False) and owned and not _alive(int(pid_text)):
                    shutil.rmtree(entry.path)
                    removed.append(Path(entry.path))
    return removed


@contextlib.contextmanager
def run_cache() -> Iterator[Path]:
    """A folder for the run's reference executables, named in ``$SCANBENCH_REFERENCE_CACHE``
    (which the cells' workers inherit) while the block runs; removed afterwards. The
    folder names the run's pid, so a later run removes it if this one is killed
    (`remove_stale`)."""
    before = os.environ.get(CACHE_ENV)
    remove_stale()
    with tempfile.TemporaryDirectory(prefix=f"{PREFIX}{os.getpid()}-") as directory:
        os.environ[CACHE_ENV] = directory
        try:
            yield Path(directory)
        finally:
            if before is None:
                os.environ.pop(CACHE_ENV, None)
            else:
                os.environ[CACHE_ENV] = before

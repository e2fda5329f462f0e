"""A scenario's reference, computed once per run and loaded by later cells: its output
(`shared_reference`) and its compiled executable (`compile_reference`).

Every cell computes the scenario's reference for its inputs before it checks its backend
(`scanbench.execution.worker`); the cells of one scenario, size, seed and dtype have the
same inputs, so the same reference. `shared_reference` keeps the first cell's (pickled)
in a folder the runner makes for the run (`run_cache`, in ``$SCANBENCH_REFERENCE_CACHE``)
and later cells load it: the LAPACK reference of the tridiagonal scenario at `default`
(100,000 systems) takes about 1 s, loading it 0.1 s, for 13 cells. Its key is a digest
of the inputs themselves (their pickle, arrays by their bytes), the scenario's name and
reference function and the x64 flag, so a reference is only ever reused for the very
inputs it was computed from; a reference or inputs that cannot be pickled are computed
in every cell, as before.

When the reference is itself a compiled JAX program (the MPPI objective, re-evaluated on
each generation's reported candidate), every cell compiled it again: 0.65 s of each MPPI
cell at `smoke`, 12 s of a smoke run. `compile_reference` takes it from JAX's persistent
compilation cache (`scanbench.compile_cache`: compiled by an earlier cell or run); with
that cache off, it keeps the compiled executable
(``jax.experimental.serialize_executable``) in the run's folder and later cells load it
(0.05 s). Only references use it: a backend's compile time is what the report shows, so
backends always compile cold. Outside a run (tests, `scanbench profile`) only the
persistent cache keeps anything.

The run folder's key of an executable is the program itself (its lowered StableHLO
text, constants included), the compiler options, the jax and jaxlib versions, the
platform, device kind and count, ``XLA_FLAGS`` and the x64 flag: a cell whose backend
sets its own XLA flags, or runs on 8 virtual devices, gets its own entry.

A kept reference or executable is a pickle: loading it runs code. So the folder is used
only when it is a real directory of this user's that no one else can write (`run_cache`
makes it 0700; `scanbench.ownership.check_owned`), and each file in it likewise; a
``$SCANBENCH_REFERENCE_CACHE`` naming anything else is refused (the cell fails, saying
so), never trusted as named.
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

from ..api import Scenario
from ..compile_cache import folder as compile_cache_folder
from ..compile_cache import unmeasured
from ..ownership import check_owned
from ..safe_files import write_bytes_atomic

CACHE_ENV = "SCANBENCH_REFERENCE_CACHE"


def _inputs_digest(inputs: Any) -> str | None:
    """A digest of the inputs: their pickle, each array by its bytes (protocol 5's
    out-of-band buffers, hashed in place: no copy); None when they cannot be pickled or
    an array is not contiguous."""
    buffers: list[pickle.PickleBuffer] = []
    try:
        head = pickle.dumps(inputs, protocol=5, buffer_callback=buffers.append)
        digest = hashlib.sha256(head)
        for buffer in buffers:
            digest.update(buffer.raw())
    except Exception:  # an input pickle cannot carry: the reference is not shared
        return None
    return digest.hexdigest()


def shared_reference(scenario: Scenario, inputs: Any) -> Any:
    """``scenario.reference(inputs)``, or the reference an earlier cell of the run computed
    from the same inputs (see the module doc). Outside a run it is always computed."""
    directory = os.environ.get(CACHE_ENV)
    digest = _inputs_digest(inputs) if directory else None
    if digest is None:
        return scenario.reference(inputs)
    import jax

    folder = check_owned(directory, f"${CACHE_ENV}")
    function = scenario.reference
    named = f"{getattr(function, '__module__', '')}.{getattr(function, '__qualname__', '')}"
    parts = [scenario.name, named, digest, str(jax.config.jax_enable_x64)]
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()
    path = folder / f"reference-{key}.pickle"
    if path.is_file():
        check_owned(path, "a kept reference", directory=False)
        # written by an earlier cell of this run, into its private folder (checked above)
        return pickle.loads(path.read_bytes())  # noqa: S301
    expected = scenario.reference(inputs)
    try:
        data = pickle.dumps(expected, protocol=5)
    except Exception:  # a reference pickle cannot carry: computed in every cell
        return expected
    _write_private(path, data)
    return expected


def _write_private(path: Path, data: bytes) -> None:
    """``data`` to ``path`` in the run's private folder: a temp file, then rename (a later
    cell sees the whole file or none). No fsync: the folder lives as long as the run."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def compile_reference(lowered: Any, compiler_options: Mapping[str, Any] | None = None) -> Any:
    """``lowered.compile(compiler_options)``: from JAX's persistent compilation cache when
    it is on (`scanbench.compile_cache`: an earlier cell or run compiled it), else the
    executable an earlier cell of the run compiled from the same program (see the module
    doc). Nobody reads a reference's compile time."""
    options = dict(compiler_options or {})
    directory = os.environ.get(CACHE_ENV)
    # a folder others can write is refused whichever cache then serves the compile
    folder = check_owned(directory, f"${CACHE_ENV}") if directory else None
    if folder is None or compile_cache_folder() is not None:
        # an executable loaded from JAX's cache cannot be serialized again ("function
        # ... not found" when loaded back): the run's folder is for when it is off
        with unmeasured():
            return lowered.compile(options)
    from jax.experimental import serialize_executable

    path = folder / f"{_key(lowered, options)}.pickle"
    if path.is_file():
        check_owned(path, "a kept reference executable", directory=False)
        # written by an earlier cell of this run, into its private folder (checked above)
        serialized, in_tree, out_tree = pickle.loads(path.read_bytes())  # noqa: S301
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

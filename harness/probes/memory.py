"""Memory of one call: XLA's static plan, the measured peak, and the minimum the work holds.

- **Static plan** (`static_plan`): ``compiled.memory_analysis()`` of each JAX executable
  (argument, output, temporary, aliased and generated-code bytes; ``planned`` = arguments +
  outputs + temporaries - aliased, what the executable holds while it runs) and its largest
  temporaries named by instruction (`scanbench.probes.buffer_assignment`).
- **Measured peak** of one warm call over the state before it:
  on CPU (`rss_peak`), the process's resident-set high-water mark. The allocator is first
  told to hand memory back (`release_freed_memory`: buffers above 128 KiB mapped and
  unmapped with each allocation, heap tops trimmed on every free); memory already cached
  at the top of a thread's arena is only returned at that arena's next free, so one call
  must run in between (the counting pass's call does: the first call after the setting
  sees only part of a call's memory, the next ones all of it). Then the mark is reset
  (``5`` to ``/proc/self/clear_refs``, Linux >= 4.0), and ``VmHWM`` after the call minus
  ``VmRSS`` before it is the peak growth: every allocation the process makes (XLA
  buffers, NumPy, Numba), page-granular.
  On GPU (`scanbench.probes.gpu.device_peak`, the GPU-only path), ``memory_stats()``:
  JAX cannot reset ``peak_bytes_in_use``, so the call's peak is exact (``peak after -
  bytes_in_use before``) only when the call raised the device's peak; otherwise the peak
  of earlier work bounds it from above and it is stored as such (``exact: false``).
- **Minimum** (`tree_nbytes`): the bytes of the scenario's inputs and of the call's output,
  what any backend must hold; ``x minimum`` = (inputs + measured peak growth) / minimum,
  1.0 for a backend whose call allocates nothing but its output.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax

from .buffer_assignment import temporaries
from .gpu import device_peak
from .peak import MeasuredPeak

STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")
RESET_PEAK_RSS = "5"  # proc(5): "reset the peak resident set size (VmHWM)"
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3  # mallopt(3)
MMAP_THRESHOLD_BYTES = 128 * 1024
# what `restore_allocator` sets (glibc's dynamic mmap threshold grows up to 32 MiB on 64-bit,
# and sets the trim threshold to twice it; the top pad's default is 128 KiB)
RESTORED = {M_MMAP_THRESHOLD: 32 << 20, M_TRIM_THRESHOLD: 64 << 20, M_TOP_PAD: 128 << 10}


def _status_bytes(text: str, key: str) -> int:
    for line in text.splitlines():
        if line.startswith(key + ":"):
            value, unit = line.split(":", 1)[1].split()
            if unit != "kB":
                raise ValueError(f"{key} in kB expected, got {line!r}")
            return int(value) * 1024
    raise ValueError(f"no {key} line in the process status")


def _settled_rss(status: Path, interval_s: float = 0.02, limit_s: float = 1.0) -> int:
    """VmRSS once two reads ``interval_s`` apart agree (memory freed by other threads, e.g.
    an executable's buffers released after the previous call, has landed), or at
    ``limit_s``."""
    deadline = time.monotonic() + limit_s
    rss = _status_bytes(status.read_text(), "VmRSS")
    while time.monotonic() < deadline:
        time.sleep(interval_s)
        again = _status_bytes(status.read_text(), "VmRSS")
        if again == rss:
            break
        rss = again
    return rss


def _glibc() -> Any | None:
    """glibc's ``mallopt`` and ``malloc_trim`` (as a CDLL), or None without glibc."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
    except (OSError, AttributeError, TypeError):
        return None
    return libc


def release_freed_memory(libc: Any | None = None) -> bool:
    """Make freed memory visible to the RSS (glibc): fix the mmap threshold at 128 KiB, so
    every larger buffer is mapped when allocated and unmapped when freed (the dynamic
    threshold would otherwise serve repeated buffers from the heap, reused unseen), and
    return the heap's free pages (``malloc_trim(0)``). Process-wide, and it makes every
    large allocation a fresh mapping: used only inside `freed_memory_visible`, after
    timing. False where there is no glibc."""
    libc = libc or _glibc()
    if libc is None:
        return False
    libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    libc.mallopt(M_TRIM_THRESHOLD, 0)
    libc.mallopt(M_TOP_PAD, 0)
    libc.malloc_trim(0)
    return True


def restore_allocator(libc: Any | None = None) -> bool:
    """Undo `release_freed_memory` for the calls that follow in this process. glibc cannot
    turn its dynamic thresholds back on once they were set, so the values they grow to in
    a process that reuses large buffers are set: the mmap threshold at its 64-bit maximum
    (32 MiB), the trim threshold at twice that, the top pad at its default (128 KiB)."""
    libc = libc or _glibc()
    if libc is None:
        return False
    for option, value in RESTORED.items():
        libc.mallopt(option, value)
    return True


@contextlib.contextmanager
def freed_memory_visible() -> Iterator[bool]:
    """`release_freed_memory` for the duration of the block, `restore_allocator` after it
    (yields False without glibc)."""
    libc = _glibc()
    released = release_freed_memory(libc) if libc is not None else False
    try:
        yield released
    finally:
        if released:
            restore_allocator(libc)


def rss_peak(
    call: Callable[[], Any],
    status: Path = STATUS,
    clear_refs: Path = CLEAR_REFS,
    trim: Callable[[], bool] = release_freed_memory,
) -> tuple[Any, MeasuredPeak]:
    """Run ``call()`` and measure its peak resident-set growth (see the module doc).

    Order matters: pending frees land first (``gc.collect``, then RSS read until it
    settles), then freed memory is released, then the mark is reset and the RSS read just
    before the call; a reset before those frees would leave the mark above the call's peak.
    """
    gc.collect()
    _settled_rss(status)
    note = "" if trim() else "no glibc malloc: memory freed earlier may be reused unseen"
    try:
        clear_refs.write_text(RESET_PEAK_RSS)
    except OSError as error:
        output = call()
        reason = f"cannot reset the peak RSS ({clear_refs}: {error.strerror or error})"
        return output, MeasuredPeak(None, "rss", note=reason)
    before = _status_bytes(status.read_text(), "VmRSS")
    output = call()
    peak = _status_bytes(status.read_text(), "VmHWM")
    return output, MeasuredPeak(max(0, peak - before), "rss", note=note)


def call_peak(call: Callable[[], Any], platform: str) -> tuple[Any, MeasuredPeak]:
    """`scanbench.probes.gpu.device_peak` over the local devices on GPU/TPU, `rss_peak`
    otherwise."""
    if platform in ("gpu", "cuda", "rocm", "tpu"):
        return device_peak(call, lambda: [d.memory_stats() for d in jax.local_devices()])
    return rss_peak(call)


def tree_nbytes(tree: Any) -> int:
    """Bytes of the array leaves of a pytree (NumPy or JAX arrays; scalars count 0)."""
    return sum(int(getattr(leaf, "nbytes", 0) or 0) for leaf in jax.tree.leaves(tree))


def static_plan(compiled: Any, top: int = 5) -> dict[str, Any]:
    """XLA's memory plan of one compiled executable, with its largest temporaries named."""

    stats = compiled.memory_analysis()
    if stats is None:
        return {"available": False, "reason": "memory_analysis() returned None"}
    plan: dict[str, Any] = {
        "available": True,
        "argument_bytes": int(stats.argument_size_in_bytes),
        "output_bytes": int(stats.output_size_in_bytes),
        "temp_bytes": int(stats.temp_size_in_bytes),
        "alias_bytes": int(stats.alias_size_in_bytes),
        "code_bytes": int(stats.generated_code_size_in_bytes),
    }
    plan["planned_bytes"] = (
        plan["argument_bytes"] + plan["output_bytes"] + plan["temp_bytes"] - plan["alias_bytes"]
    )
    try:
        assignment = stats.serialized_buffer_assignment_proto
        module = compiled.runtime_executable().hlo_modules()[0].as_serialized_hlo_module_proto()
        plan["temporaries"] = [t.to_json() for t in temporaries(assignment, module, top)]
    except Exception as error:  # the totals stand without the names
        plan["temporaries_error"] = f"{type(error).__name__}: {error}"
    return plan

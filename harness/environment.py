"""Environment metadata stored with every run (collected in a worker process).

It is collected in a fresh process, like every cell, so the parent never initialises a
device (on a GPU, JAX preallocates most of its memory in the first process that uses it).
"""

from __future__ import annotations

import datetime
import os
import platform
import socket
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from .checkout import git_commit, own_commit, run_git
from .credentials import public_url
from .import_path import import_root
from .probes.caches import DRAM, Level, measure_levels


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_facts(cwd: str | os.PathLike[str] | None = None) -> dict[str, Any] | None:
    """The commit the project is at (sha, author date, subject, parents), its branch and
    remote URL, for the history across commits; None outside a git work tree."""
    fields = ("%H", "%aI", "%s", "%P")
    try:
        shown = run_git(cwd, "log", "-1", f"--format={'%x00'.join(fields)}")
        branch = run_git(cwd, "rev-parse", "--abbrev-ref", "HEAD")
        remote = run_git(cwd, "remote", "get-url", "origin")
    except (OSError, subprocess.SubprocessError):
        return None
    if shown.returncode != 0 or not shown.stdout.strip():
        return None
    sha, date, subject, parents = shown.stdout.rstrip("\n").split("\x00")
    return {
        "commit": sha,
        "date": date,
        "subject": subject,
        "parents": parents.split(),
        "branch": branch.stdout.strip() if branch.returncode == 0 else None,
        # never its credentials: a CI checkout's remote carries its token
        "remote": public_url(remote.stdout.strip()) if remote.returncode == 0 else None,
        "dirty": (git_commit(cwd) or "").endswith("-dirty"),
    }


def device_info() -> dict[str, Any]:
    """The default JAX backend's platform, device kind and count."""
    import jax

    devices = jax.devices()
    return {
        "platform": devices[0].platform,
        "device_kind": devices[0].device_kind,
        "device_count": len(devices),
    }


def collect(measure_bandwidth: bool = True) -> dict[str, Any]:
    """Versions, device, CPU, flags, git commit, host, time, and the memory bandwidth."""
    import jax

    env: dict[str, Any] = {
        "timestamp": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
        "python": platform.python_version(),
        "versions": {
            name: _version(name)
            for name in ("scanbench", "jax", "jaxlib", "numba", "numpy", "scipy", "evosax", "cma")
        },
        **device_info(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "x64_default": bool(jax.config.jax_enable_x64),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        # the project scanbench runs in (its import root), and scanbench's own checkout
        # (None when installed from a wheel)
        "git_commit": git_commit(import_root()),
        "git": git_facts(import_root()),
        "scanbench_commit": own_commit(),
    }
    if measure_bandwidth:
        # the bound of each memory level: a cell is compared with its working set's level
        levels = measure_levels()
        env["memory_levels"] = [level.to_json() for level in levels]
        env["memory_bandwidth"] = dram_copy(levels)
    return env


def dram_copy(levels: list[Level]) -> dict[str, float]:
    """``environment.memory_bandwidth``, the one-thread DRAM copy of the measured levels:
    results before the levels were measured carry only this figure, and their reports
    read it (a second copy of its own took ~1.2 s per run and measured the same)."""
    dram = next(level for level in levels if level.name == DRAM)
    copied = dram.working_set_bytes / 2  # source + destination
    return {
        "bytes_per_s": dram.bytes_per_s,
        "copy_bytes": copied,
        "best_s": 2 * copied / dram.bytes_per_s,
    }

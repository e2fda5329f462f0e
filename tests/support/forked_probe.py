"""A worker stand-in for the fork server's tests: ``python -m tests.support.forked_probe
MODE OUT [ARGS]`` writes what it sees of its process to OUT (JSON), then acts on MODE."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import scanbench
from scanbench.execution.parent_watch import exit_with_parent


def seen() -> dict:
    fds = {}
    for fd in sorted(int(fd) for fd in os.listdir("/proc/self/fd")):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # listdir's own, closed since
            continue
        if fd > 2 and not target.startswith("/proc/"):  # not listdir's own
            fds[str(fd)] = target
    counter = getattr(scanbench, "_forked_probe_runs", 0) + 1
    scanbench._forked_probe_runs = counter  # a later child must not see this
    from jax._src import xla_bridge

    started = bool(getattr(xla_bridge, "_backends", None))
    import jax

    return {
        "devices": jax.device_count(),  # after the check: XLA_FLAGS applied?
        "name": __name__,
        "argv": sys.argv[1:],
        "cwd": os.getcwd(),
        "path0": sys.path[0],
        "env": {k: v for k, v in os.environ.items() if k.startswith("PROBE_")},
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "fds": fds,
        "stdin": os.readlink("/proc/self/fd/0"),
        "stdout": os.readlink("/proc/self/fd/1"),
        "ppid": os.getppid(),
        "runs_seen": counter,
        "backends_started": started,
    }


def main(argv: list[str]) -> int:
    exit_with_parent([])  # as a worker does: its death signal asked for
    mode, out = argv[0], argv[1]
    report = seen()
    with open(out + ".tmp", "w") as stream:
        json.dump(report, stream)
    os.replace(out + ".tmp", out)
    if mode == "quiet-sleep":  # nothing written: a closed stderr does not end it
        time.sleep(float(argv[2]))
        return 0
    print(f"probe stderr: {mode}", file=sys.stderr)
    if mode == "write-fd":  # a passed descriptor, at the number the runner gave it
        os.write(int(argv[2]), b"through the pipe")
    if mode == "exit":
        return int(argv[2])
    if mode == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if mode == "sleep":
        time.sleep(float(argv[2]))
    if mode == "raise":
        raise RuntimeError("the probe failed on purpose")
    if mode == "child-then-sleep":  # a child of its own, its pid in ARGS[0]; then asleep
        _start_child(argv[2])
        time.sleep(float(argv[3]))
    if mode == "child-then-exit":  # a child of its own left running, holding stderr
        _start_child(argv[2])
    if mode == "flood":  # ARGS[0] MiB on stderr, then a last line, then exit 1
        block = ("x" * 1023 + "\n") * 1024
        for _ in range(int(argv[2])):
            sys.stderr.write(block)
        print("the last line of a flood", file=sys.stderr)
        return 1
    return 0


def _start_child(pid_file: str) -> None:
    import subprocess

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    with open(pid_file + ".tmp", "w") as stream:
        stream.write(str(child.pid))
    os.replace(pid_file + ".tmp", pid_file)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

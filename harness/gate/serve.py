"""A cell served in blocks: the worker of a baseline comparison (`harness.interleave`).

Run by path with the *candidate's* copy of this file, against the code under ``ROOT``
(the candidate checkout, or the baseline's git worktree), so that both sides are timed by
the same loop and only the measured code differs::

    python harness/gate/serve.py ROOT SPEC_JSON

It loads the scenario's source with ROOT's ``harness.sources`` (only the public Scenario /
Backend API, so older revisions work; one from before sources is asked by name),
prepares the cell, checks its first output against the scenario's reference, warms up,
then answers JSON lines on stdin:
``{"samples": k}`` -> ``{"samples": [s, ...]}`` (k timed calls). The calls are timed by
the *candidate's* timing loop (``timing.py`` beside this file, loaded by path, whatever
ROOT holds): each waits for the whole output, as in the cell worker.
``cpus`` in the spec pins the worker to those CPUs before anything is imported.
``slowdown`` in the spec (test-only) multiplies every timed sample by that factor, to
measure the gate's detection rate of exactly that slowdown (see `slowed`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]  # the candidate's harness/


def _candidate(name: str):
    """The candidate's ``harness/<name>.py`` loaded by path (ROOT may hold an older copy
    or none): the timing loop and the strict checks are the candidate's on both sides."""
    spec = importlib.util.spec_from_file_location(f"_scanbench_candidate_{name}", HERE / name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def slowed(samples: list[float], factor: float) -> list[float]:
    """Samples of a call ``factor`` x slower (test-only: the gate's detection rate).

    The samples are scaled rather than the call stretched by spinning after it: spinning
    leaves the CPU to nothing else for a while between calls, and XLA:CPU's thread pool
    then runs the next call faster (its idle threads no longer compete with it on the
    pinned CPU), so a 1.10x spin measured as 1.05x on the default TDMA solve. Scaling
    injects exactly the slowdown asked for, on top of the workload's real noise."""
    return samples if factor == 1.0 else [value * factor for value in samples]


def jax_version() -> str:
    import jax

    return jax.__version__


def jaxlib_version() -> str:
    import jaxlib

    return getattr(jaxlib, "__version__", "?")


def load_scenario(spec: dict):
    """The scenario of ``spec["source"]``, imported from ROOT (the code being measured);
    a ROOT from before scenario sources is asked by name (or file) instead."""
    try:
        from harness.sources import load
    except ImportError:  # an older revision: harness.registry.get_scenario(name, file)
        from harness.registry import get_scenario

        target = spec["source"].rpartition(":")[0]
        return (
            get_scenario(None, target) if target.endswith(".py") else get_scenario(spec["scenario"])
        )
    return load(spec["source"])


def serve(spec: dict, channel) -> None:
    scenario = load_scenario(spec)
    backend = scenario.backend(spec["backend"])
    size = scenario.size(spec["size"])
    dtype = spec.get("dtype") or scenario.dtypes[0]
    if dtype == "float64":  # before any array exists, as the cell workers do
        import jax

        jax.config.update("jax_enable_x64", True)
    inputs = scenario.make_inputs(size, spec.get("seed", 0), dtype)
    timing, checks = _candidate("timing.py"), _candidate("checks.py")
    expected = scenario.reference(inputs)
    prepared = backend.prepare(inputs, size)
    output = timing.call_and_wait(backend.run, prepared)
    to_reference = getattr(backend, "to_reference", lambda value: value)
    check = getattr(checks, "check_of", lambda s, b, p: s.check)(scenario, backend, prepared)
    checks.checked_error(check, to_reference(output), expected, dtype)
    factor = float(spec.get("slowdown", 1.0))
    (warm_s,) = timing.sample(backend.run, prepared, 1)  # warm-up, timed: sizes the blocks
    import harness

    versions = {"jax": jax_version(), "jaxlib": jaxlib_version(), "python": sys.version.split()[0]}
    reply = {"ready": True, "harness": harness.__file__, "call_s": warm_s, "versions": versions}
    channel.write(json.dumps(reply) + "\n")
    channel.flush()
    for line in sys.stdin:
        samples = timing.sample(backend.run, prepared, int(json.loads(line)["samples"]))
        samples = slowed(samples, factor)
        channel.write(json.dumps({"samples": samples}) + "\n")
        channel.flush()


def main(argv: list[str]) -> int:
    root, spec = argv[0], json.loads(argv[1])
    if spec.get("cpus"):  # before JAX starts its thread pools: they size to what they see
        os.sched_setaffinity(0, spec["cpus"])
    sys.path[0] = root  # not this file's folder: import the measured code from ROOT
    channel = os.fdopen(os.dup(1), "w")  # the protocol keeps the real stdout ...
    os.dup2(2, 1)  # ... and whatever the measured code prints goes to stderr
    try:
        serve(spec, channel)
    except Exception as error:
        channel.write(json.dumps({"error": f"{type(error).__name__}: {error}"}) + "\n")
        channel.flush()
        return 1
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # every reply is flushed; skip the ~0.6 s teardown of a JAX process

"""A cell served in blocks: the worker of a baseline comparison (`harness.interleave`).

Run by path with the *candidate's* copy of this file, against the code under ``ROOT``
(the candidate checkout, or the baseline's git worktree), so that both sides are timed by
the same loop and only the measured code differs::

    python harness/serve.py ROOT SPEC_JSON

It imports ``harness.registry`` and the scenarios from ROOT (only the public Scenario /
Backend API, so older revisions work), prepares the cell, checks its first output against
the scenario's reference, warms up, then answers JSON lines on stdin:
``{"samples": k}`` -> ``{"samples": [s, ...]}`` (k timed calls; each waits for its result).
``slowdown`` in the spec (test-only) stretches every call by that factor by spinning on the
CPU after it, to measure the gate's detection rate.
"""

from __future__ import annotations

import json
import os
import sys
import time


def _spin_until(deadline: float) -> None:
    while time.perf_counter() < deadline:
        pass


def serve(spec: dict, channel) -> None:
    from harness.registry import get_scenario  # from ROOT: the code being measured

    scenario = get_scenario(spec["scenario"], spec.get("scenario_file"))
    backend = scenario.backend(spec["backend"])
    size = scenario.size(spec["size"])
    dtype = spec.get("dtype") or scenario.dtypes[0]
    if dtype == "float64":  # before any array exists, as the cell workers do
        import jax

        jax.config.update("jax_enable_x64", True)
    inputs = scenario.make_inputs(size, spec.get("seed", 0), dtype)
    prepared = backend.prepare(inputs, size)
    output = backend.run(prepared)
    to_reference = getattr(backend, "to_reference", lambda value: value)
    scenario.check(to_reference(output), scenario.reference(inputs), dtype)
    backend.run(prepared)  # warm-up
    import harness

    channel.write(json.dumps({"ready": True, "harness": harness.__file__}) + "\n")
    channel.flush()
    slowdown = float(spec.get("slowdown", 1.0))
    for line in sys.stdin:
        count = int(json.loads(line)["samples"])
        samples = []
        for _ in range(count):
            start = time.perf_counter()
            backend.run(prepared)
            elapsed = time.perf_counter() - start
            if slowdown != 1.0:
                _spin_until(start + elapsed * slowdown)
                elapsed = time.perf_counter() - start
            samples.append(elapsed)
        channel.write(json.dumps({"samples": samples}) + "\n")
        channel.flush()


def main(argv: list[str]) -> int:
    root, spec = argv[0], json.loads(argv[1])
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
    sys.exit(main(sys.argv[1:]))

"""A cell served in blocks: the worker of a baseline comparison (`scanbench.gate.interleave`).

Run by path with the *candidate's* copy of this file, against the code under ``ROOT``
(the candidate checkout, or the baseline's git worktree), so that both sides are timed by
the same loop and only the measured code differs::

    python CANDIDATE_TREE/harness/gate/serve.py ROOT SPEC_JSON

It imports the measured code from ROOT (`import_root`) and loads the scenario's source
with ``scanbench.sources`` (only the public Scenario / Backend API, so older revisions
work; one from before the one-name layout through ``harness.sources``), prepares the cell,
checks its first output against the scenario's reference, warms up, then answers JSON
lines on stdin: ``{"samples": k}`` -> ``{"samples": [s, ...]}`` (k timed calls), and
``{"explain": true}`` -> ``{"facts": ...}`` (`scanbench.gate.explain`: one counted call,
the HLO in short, the environment; asked after the timed blocks). The calls
are timed by the *candidate's* timing loop (``timing.py`` beside this file's folder, loaded
by path under a private package name, whatever ROOT holds): each waits for the whole
output, as in the cell worker.
``cpus`` in the spec pins the worker to those CPUs before anything is imported.
``slowdown`` in the spec (test-only) makes every timed call really that factor slower, to
measure the gate's detection rate of that slowdown (see `slowed`).
Nothing a worker compiles is timed, so its reference and its cell compile through the
persistent compilation cache (``scanbench.compile_cache``; ``$SCANBENCH_COMPILE_CACHE``).

Standard library only at the top: it runs before ROOT's code is on the path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import json
import os
import sys
import tomllib
import types
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]  # the candidate's package folder (harness/)
CANDIDATE = "_scanbench_candidate"  # the private name the candidate's modules load under


def _candidate(name: str):
    """The candidate's ``scanbench.<name>`` (ROOT may hold an older copy or none), loaded
    from `HERE` as ``_scanbench_candidate.<name>`` with its relative imports, without
    running the package's ``__init__``: the timing loop and the strict checks are the
    candidate's on both sides."""
    if CANDIDATE not in sys.modules:
        package = types.ModuleType(CANDIDATE)
        package.__path__ = [str(HERE)]
        sys.modules[CANDIDATE] = package
    return importlib.import_module(f"{CANDIDATE}.{name}")


def scanbench_layout(root: Path) -> dict[str, Path] | None:
    """When ROOT is a checkout of scanbench itself: ``{import name: folder}`` of its
    packages (``[tool.setuptools] package-dir``; ``{}`` for a revision from before the
    one-name layout, whose ``harness`` package is top-level); None for any other tree."""
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return None
    if project.get("project", {}).get("name") != "scanbench":
        return None
    folders = project.get("tool", {}).get("setuptools", {}).get("package-dir", {})
    return {name: root / folder for name, folder in folders.items()}


class _Mapped(importlib.abc.MetaPathFinder):
    """Imports ``scanbench`` and its mapped subpackages from ROOT's folders (what an
    editable install of ROOT would do), ahead of any installed scanbench."""

    def __init__(self, folders: dict[str, Path]) -> None:
        self.folders = folders

    def find_spec(self, fullname, path=None, target=None):
        folder = self.folders.get(fullname)
        if folder is None:  # a module inside a mapped package: found through its __path__
            return None
        return importlib.util.spec_from_file_location(
            fullname, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )


def import_root(root: Path) -> str:
    """Make ROOT's code the code that is imported, and return the name of the package
    whose ``sources`` loads its scenarios: a scanbench checkout of the one-name layout
    through `_Mapped` (``scanbench``); an older one from ``sys.path`` (``harness``); any
    other tree (a user's repository) first on ``sys.path``, measured by the installed
    scanbench."""
    sys.path[0] = str(root)  # not this file's folder
    folders = scanbench_layout(root)
    if folders:
        sys.meta_path.insert(0, _Mapped(folders))
    return "harness" if folders == {} else "scanbench"


def measured_package() -> str:
    """The file of the scanbench package that the measured code imported."""
    module = sys.modules.get("scanbench") or sys.modules.get("harness")
    return getattr(module, "__file__", "") or ""


SIZING_S = 0.1  # a block of calls while a planted slowdown is sized (at least 5 calls)
SIZING_ROUNDS = 4


def busy(iterations: int) -> int:
    """A fixed amount of pure-Python work: ``iterations`` turns of a loop whose every
    turn costs the same (small integers only)."""
    flip = 0
    for _ in range(iterations):
        flip ^= 1
    return flip


def busy_iterations(seconds: float, clock=None) -> int:
    """The `busy` iterations that take ``seconds`` of this process's CPU time (``clock``,
    default ``time.process_time``): from 1,000, rescaled three times by the median of 5
    timings at the current count (so that the loop's own overhead is counted at the
    size it will run at)."""
    import statistics
    import time

    clock = clock or time.process_time
    iterations = 1000
    for _ in range(3):
        timings = []
        for _ in range(5):
            start = clock()
            busy(iterations)
            timings.append(clock() - start)
        took = statistics.median(timings)
        iterations = max(1, round(iterations * seconds / took)) if took > 0 else iterations
    return iterations


def realized(run, slower, prepared, count: int, timing, before=None) -> float:
    """This worker's slowed calls over its plain ones: blocks of ``count`` calls in the
    order plain, slowed, slowed, plain (drift cancels), each median taken over both."""
    import statistics

    plain, slow = [], []
    for calls in (run, slower, slower, run):
        (plain if calls is run else slow).extend(
            timing.sample(calls, prepared, count, before=before)
        )
    return statistics.median(slow) / statistics.median(plain)


def slowed(run, prepared, factor: float, timing, before=None):
    """``run`` made really ``factor`` x slower (test-only: the gate's detection rate):
    after each call's output is ready, a fixed number of `busy` iterations, sized before
    the timed blocks so that this worker's calls take ``factor`` x as long as its plain
    calls, in wall time, as the gate measures them.

    The first guess is (factor - 1) x the call's CPU time (`busy_iterations`); then, for
    `SIZING_ROUNDS` rounds, blocks of plain and slowed calls are timed (`realized`) and
    the iterations rescaled by what was planted over what was realized. Measuring the
    effect, not only the work, matters: extra host work between calls changes how fast
    the next call runs (XLA:CPU's idle threads, the caches), and on a busy machine a
    longer call is preempted more often, so the same work realized 1.10x for an asked
    1.05x on one cell and half of it on another. The candidate side then really runs
    slower, on the same pinned CPU, timed by the same loop; the calibration reports the
    ratio the gate measured beside ``factor``."""
    import statistics
    import time

    if factor == 1.0:
        return run
    (first,) = timing.sample(run, prepared, 1, before=before)
    count = min(1000, max(5, int(SIZING_S / first) if first > 0 else 1000))
    call_s = statistics.median(
        timing.sample(run, prepared, count, clock=time.process_time, before=before)
    )
    iterations = busy_iterations((factor - 1.0) * call_s)

    def slower(ready):
        output = timing.call_and_wait(run, ready)
        busy(iterations)
        return output

    for _ in range(SIZING_ROUNDS):
        excess = realized(run, slower, prepared, count, timing, before) - 1.0
        scale = (factor - 1.0) / excess if excess > 0 else 4.0
        iterations = max(1, round(iterations * min(4.0, max(0.25, scale))))
    return slower


def jax_version() -> str:
    import jax

    return jax.__version__


def jaxlib_version() -> str:
    import jaxlib

    return getattr(jaxlib, "__version__", "?")


def load_scenario(spec: dict, package: str):
    """The scenario of ``spec["source"]``, loaded with ``package.sources`` (`import_root`);
    a revision from before scenario sources asked by name (or file) instead."""
    if package == "scanbench":
        from scanbench.sources import load

        return load(spec["source"])
    try:
        from harness.sources import load
    except ImportError:  # older still: harness.registry.get_scenario(name, file)
        from harness.registry import get_scenario

        target = spec["source"].rpartition(":")[0]
        if target.endswith(".py"):
            return get_scenario(None, target)
        return get_scenario(spec["scenario"])
    # a bundled scenario's source names its module as it is now
    return load(spec["source"].replace("scanbench.scenarios", "scenarios", 1))


def serve(spec: dict, scenario, channel) -> None:
    backend = scenario.backend(spec["backend"])
    size = scenario.size(spec["size"])
    dtype = spec.get("dtype") or scenario.dtypes[0]
    if dtype == "float64":  # before any array exists, as the cell workers do
        import jax

        jax.config.update("jax_enable_x64", True)
    inputs = scenario.make_inputs(size, spec.get("seed", 0), dtype)
    timing, checks = _candidate("timing"), _candidate("checks")
    # the gate times calls, never compiles: the reference and the cell compile through the
    # persistent cache (scanbench.compile_cache), so a rule's later workers load what its
    # first one compiled instead of compiling it again (seconds per worker)
    with _candidate("compile_cache").unmeasured():
        expected = scenario.reference(inputs)
        prepared = backend.prepare(inputs, size)
        # a stateful or donating backend's setup, untimed before every call (older
        # revisions' backends have no such field)
        own_setup = getattr(backend, "setup", None)
        setup = None if own_setup is None else (lambda: own_setup(prepared))
        if setup is not None:
            setup()
        output = timing.call_and_wait(backend.run, prepared)
    to_reference = getattr(backend, "to_reference", lambda value: value)
    check = getattr(checks, "check_of", lambda s, b, p: s.check)(scenario, backend, prepared)
    checks.checked_error(check, to_reference(output), expected, dtype)
    call = slowed(backend.run, prepared, float(spec.get("slowdown", 1.0)), timing, setup)
    # warm-up, timed: sizes the blocks (the median of the last 3 of 5: the first calls
    # after a compile are slower, and one call preempted on a busy machine made a block
    # of 11 calls where 75 fill it)
    warm_s = sorted(timing.sample(call, prepared, 5, before=setup)[2:])[1]
    versions = {"jax": jax_version(), "jaxlib": jaxlib_version(), "python": sys.version.split()[0]}
    reply = {
        "ready": True,
        "harness": measured_package(),
        "imported": _candidate("sources").imported_from(spec["source"]),
        "call_s": warm_s,
        "versions": versions,
    }
    channel.write(json.dumps(reply) + "\n")
    channel.flush()
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("explain"):  # after the timed blocks: a counted call, the HLO
            channel.write(json.dumps(_facts(backend, prepared)) + "\n")
            channel.flush()
            continue
        samples = timing.sample(call, prepared, int(request["samples"]), before=setup)
        channel.write(json.dumps({"samples": samples}) + "\n")
        channel.flush()


def _facts(backend, prepared) -> dict:
    """``{"facts": ...}`` of the prepared backend (the candidate's probes), or
    ``{"facts_error": why}``: an explanation is information, the verdict stands without."""
    try:
        return {"facts": _candidate("probes.passes").cell_facts(backend, prepared)}
    except Exception as error:
        return {"facts_error": f"{type(error).__name__}: {error}"}


RESTARTED = "SCANBENCH_SERVE_RESTARTED"  # set when the worker re-started with its flags


def cell_flags(backend) -> str | None:
    """The ``XLA_FLAGS`` the cell's own worker would start with (`scanbench.execution.
    launcher.worker_environ`): the flags the backend declares, and one XLA:CPU device per
    core for a sharded backend; None when this process already has them."""
    current = os.environ.get("XLA_FLAGS", "")
    per_core = str(getattr(backend, "strategy", "")) == "sharded"
    environ = _candidate("sharding.distributed").environ_for(None, os.environ, per_core=per_core)
    declared = tuple(getattr(backend, "xla_flags", ()) or ())
    wanted = environ.get("XLA_FLAGS", "")
    if declared:
        wanted = _candidate("xla_options").merge(wanted, declared)
    return None if wanted == current else wanted


def refuse_declared_flags(backend) -> None:
    """Raise the cell worker's one line when the installed jaxlib refuses (or would
    silently ignore) a flag the backend declares (`scanbench.xla_options.refusals`)."""
    declared = tuple(getattr(backend, "xla_flags", ()) or ())
    if declared:
        options = _candidate("xla_options")
        refused = options.refusals(declared).refused
        if refused:
            message = options.refusal_message(f"backend {backend.name!r}", refused)
            raise _candidate("errors").InputError(message)


def main(argv: list[str]) -> int:
    root, spec = argv[0], json.loads(argv[1])
    if spec.get("cpus"):  # before JAX starts its thread pools: they size to what they see
        os.sched_setaffinity(0, spec["cpus"])
    package = import_root(Path(root))
    channel = os.fdopen(os.dup(1), "w")  # the protocol keeps the real stdout ...
    os.dup2(2, 1)  # ... and whatever the measured code prints goes to stderr
    try:
        scenario = load_scenario(spec, package)
        if not os.environ.get(RESTARTED):
            backend = scenario.backend(spec["backend"])
            refuse_declared_flags(backend)
            wanted = cell_flags(backend)
            if wanted is not None:  # XLA reads its flags once, as JAX starts: again with them
                sys.stdout.flush()  # what the scenario printed: to stderr, as usual
                channel.flush()
                os.dup2(channel.fileno(), 1)
                environ = {**os.environ, "XLA_FLAGS": wanted, RESTARTED: "1"}
                # this very interpreter and file again, with the cell's XLA flags
                os.execve(sys.executable, [sys.executable, __file__, *argv], environ)  # noqa: S606
        serve(spec, scenario, channel)
    except Exception as error:
        channel.write(json.dumps({"error": f"{type(error).__name__}: {error}"}) + "\n")
        channel.flush()
        return 1
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # every reply is flushed; skip the teardown of a JAX process

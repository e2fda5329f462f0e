"""Bring your own function: `compare` and `profile` plain Python functions, in a notebook or
a test, with the harness's own timing loop, checks, counts and diagnosis.

    >>> from scanbench import compare
    >>> table = compare({"loop": loop, "vmap": vmapped, "scan": scanned}, x, reference="loop")
    >>> table[["median_s", "speedup", "dispatches", "diagnosis"]]

Each function is one backend of an in-memory scenario whose inputs are the arguments given
and whose reference answer is the reference function's output; it is measured exactly as
a `scanbench run` cell is (`scanbench.execution.worker.measure`): compile apart (a jitted function
is lowered and compiled ahead of time in the untimed prepare), the first output checked
against the reference's (``allclose`` with a stated tolerance, NaN/inf refused, inputs
left unchanged), adaptive samples that wait for every output (`scanbench.timing`), then one
counted call (dispatches, kernels, GPU launch equivalents, transfers, recompilations,
memory), the time decomposition from unit costs measured in this process and the
diagnosis (`scanbench.diagnosis`). By default everything runs in this process (the result
says so: no worker isolation, so one function's compilation caches or threads can affect
the next); ``isolate=True`` runs each function in a fresh worker process instead, when the
functions and arguments can be pickled (cloudpickle).

The result is a `pandas.DataFrame`, one row per function, whose ``attrs["run"]`` is the
stored-run form `report` writes as the markdown and HTML reports.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .api import (
    Backend,
    InputError,
    MismatchError,
    Record,
    Scenario,
    Size,
    Strategy,
)
from .checks import leaf_path
from .diagnosis import diagnose, facts_of
from .environment import collect
from .execution.cells import Cell
from .execution.launcher import decomposed, run_cell_in_worker, with_stats
from .execution.worker import Target, measure
from .factories import loop_backend
from .import_path import with_import_root
from .probes.overheads import measure_all
from .reports.frame import MIN_SAMPLES, NOT_JITTED, records_frame
from .reports.written import write_reports
from .sources import write_pickled
from .store import Run, ScenarioFacts
from .timing import TimingConfig

NAME = "functions"
ISOLATION = {
    False: "in-process: no worker isolation (one function's caches and threads can affect "
    "the next)",
    True: "one fresh worker process per function",
}
# the strategy a function's name implies, when ``strategies`` does not say
KEYWORDS = (
    ("loop", Strategy.SEQUENTIAL),
    ("sequential", Strategy.SEQUENTIAL),
    ("vmap", Strategy.VMAPPED),
    ("scan", Strategy.SCANNED),
    ("numba", Strategy.NUMBA),
    ("shard", Strategy.SHARDED),
    ("library", Strategy.LIBRARY),
)
RTOL = {"float64": 1e-9, "float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2}
COLUMNS = [
    "strategy",
    "status",
    "median_s",
    "iqr_s",
    "samples",
    "rel_width",
    "compile_s",
    "first_call_s",
    "speedup",
    "x_fastest",
    "tie",
    "max_error",
    "dispatches",
    "kernels_trace",
    "kernels_static",
    "launch_equivalent",
    "h2d",
    "d2h",
    "host_conversions",
    "compiles",
    "traces",
    "dispatch_pct",
    "launch_pct",
    "transfer_pct",
    "compile_pct",
    "device_pct",
    "host_pct",
    "mem_peak",
    "diagnosis",
    "notes",
    "error",
]


def _strategy(name: str, given: Mapping[str, str]) -> Strategy:
    if name in given:
        try:
            return Strategy(given[name])
        except ValueError:
            choices = ", ".join(str(s) for s in Strategy if s != Strategy.ROOFLINE)
            raise InputError(
                f"strategies[{name!r}] = {given[name]!r}; choose one of: {choices}"
            ) from None
    for keyword, strategy in KEYWORDS:
        if keyword in name.lower():
            return strategy
    raise InputError(
        f"function {name!r}: say its strategy, e.g. strategies={{{name!r}: 'scanned'}} "
        f"(one of: {', '.join(str(s) for s in Strategy if s != Strategy.ROOFLINE)}); "
        "names containing loop, vmap, scan, numba, shard or library are read as such"
    )


def _leaves(tree: Any) -> list[tuple[str, np.ndarray]]:
    """(path as a reader names it, leaf as a host array) of every leaf; a Python float or
    complex leaf takes JAX's default precision (float32 unless x64 is on), the precision
    the function computed it in."""
    import jax

    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    default = np.float64 if jax.config.jax_enable_x64 else np.float32
    leaves = []
    for path, leaf in flat:
        name = leaf_path(tree, jax.tree_util.keystr(path) or "(root)")
        if isinstance(leaf, float) and not isinstance(leaf, np.floating):
            leaves.append((name, np.asarray(leaf, dtype=default)))
        else:
            leaves.append((name, np.asarray(leaf)))
    return leaves


def _set_up_then(setup: Callable[[], Any] | None, function: Callable[..., Any], args: tuple):
    """``function(*args)`` after ``setup()``: the reference call starts from the state
    every timed call starts from."""
    if setup is not None:
        setup()
    return function(*args)


def _host(tree: Any) -> Any:
    import jax

    return jax.tree.map(np.asarray, jax.block_until_ready(tree))


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """``|output - expected| <= atol + rtol |expected|`` per leaf; None: by the dtype the
    function returned (`RTOL`: the looser of the output's and the reference's) and
    ``atol = rtol x max |expected|`` of the leaf."""

    rtol: float | None = None
    atol: float | None = None

    def of(self, expected: np.ndarray, returned: np.ndarray | None = None) -> tuple[float, float]:
        dtypes = [expected.dtype] + ([returned.dtype] if returned is not None else [])
        by_dtype = max(RTOL.get(str(dtype), 1e-6) for dtype in dtypes)
        rtol = self.rtol if self.rtol is not None else by_dtype
        scale = float(np.max(np.abs(expected))) if expected.size else 0.0
        atol = self.atol if self.atol is not None else rtol * scale
        return rtol, atol

    def describe(self) -> str:
        rtol = (
            f"rtol {self.rtol:g}"
            if self.rtol is not None
            else "rtol by the returned dtype (f64 1e-9, f32 1e-5)"
        )
        atol = f"atol {self.atol:g}" if self.atol is not None else "atol = rtol x max |expected|"
        return f"{rtol}, {atol}"


def _check(tolerance: Tolerance) -> Callable[[Any, Any, str], float]:
    def check(output: Any, expected: Any, dtype: str) -> float:
        got, want = _leaves(output), _leaves(expected)
        if len(got) != len(want):
            raise MismatchError(
                f"output has {len(got)} arrays, the reference {len(want)}", float("inf"), 0.0
            )
        worst = 0.0
        for (name, a), (_, b) in zip(got, want, strict=True):
            if a.shape != b.shape:
                raise MismatchError(
                    f"output {name} has shape {a.shape}, the reference {b.shape}",
                    float("inf"),
                    0.0,
                )
            rtol, atol = tolerance.of(b, a)
            error = np.abs(a.astype(np.float64) - b.astype(np.float64))
            allowed = atol + rtol * np.abs(b.astype(np.float64))
            if not np.all(error <= allowed):
                at = int(np.argmax(error - allowed))
                raise MismatchError(
                    f"output {name} differs from the reference's (at flat index {at}: "
                    f"{a.flat[at]!r} vs {b.flat[at]!r})",
                    float(error.max()),
                    float(allowed.flat[at]),
                )
            worst = max(worst, float(error.max()) if error.size else 0.0)
        return worst

    return check


def _backend(
    name: str,
    function: Callable[..., Any],
    strategy: Strategy,
    setup: Callable[[], Any] | None = None,
    checked: bool = True,
) -> Backend:
    jitted = hasattr(function, "lower")

    def prepare(args: tuple, size: Size) -> dict[str, Any]:
        compiled = None
        if jitted:  # the compile time, measured apart from the first call
            try:
                compiled = function.lower(*args).compile()
            except Exception:  # static arguments it cannot lower as given: first call
                compiled = None
        return {"args": args, "compiled": compiled}

    def executables(prepared: dict[str, Any]) -> dict[str, Any]:
        compiled = prepared["compiled"]
        return {name: (compiled, 1)} if compiled is not None else {}

    return loop_backend(
        name,
        strategy,
        prepare,
        lambda prepared: function(*prepared["args"]),
        engine="jax" if jitted else NOT_JITTED,
        description=getattr(function, "__doc__", None) or "",
        executables=executables if jitted else None,
        setup=None if setup is None else (lambda prepared: setup()),
        checked=checked,
    )


def scenario_of(
    functions: Mapping[str, Callable[..., Any]],
    args: tuple,
    reference: str,
    strategies: Mapping[str, str] | None = None,
    tolerance: Tolerance = Tolerance(),
    work: Mapping[str, float] | None = None,
    name: str = NAME,
    setup: Callable[[], Any] | Mapping[str, Callable[[], Any]] | None = None,
    check: bool = True,
) -> Scenario:
    """The in-memory scenario of ``functions`` on ``args`` (see the module doc);
    ``setup``: one callable for every function, or one per function name."""
    if not functions:
        raise InputError("compare needs at least one function: {name: function, ...}")
    for key, function in functions.items():
        if not isinstance(key, str) or not callable(function):
            raise InputError(f"functions[{key!r}] must be a callable named by a string")
    if reference not in functions:
        raise InputError(
            f"reference {reference!r} is not one of the functions: {', '.join(functions)}"
        )
    units = dict(work or {"calls": 1.0})
    for unit, amount in units.items():
        if not (isinstance(amount, int | float) and np.isfinite(amount) and amount > 0):
            raise InputError(f"work[{unit!r}] must be a finite number > 0, got {amount!r}")
    strategies = dict(strategies or {})
    unknown = set(strategies) - set(functions)
    if unknown:
        raise InputError(f"strategies names no function: {', '.join(sorted(unknown))}")
    setups = dict(setup) if isinstance(setup, Mapping) else dict.fromkeys(functions, setup)
    unknown = set(setups) - set(functions)
    if unknown or not all(s is None or callable(s) for s in setups.values()):
        raise InputError(
            "setup must be a callable (run before every call of every function) or "
            f"{{name: callable}} naming the functions ({', '.join(functions)})"
        )
    backends = {
        key: _backend(key, function, _strategy(key, strategies), setups.get(key), check)
        for key, function in functions.items()
    }
    shapes = ", ".join(f"{a.dtype}{list(a.shape)}" for _, a in _leaves(args)) or "no arrays"
    size = Size("default", {"args": shapes}, "the arguments given")
    return Scenario(
        name=name,
        description=f"{len(functions)} functions on ({shapes})",
        sizes={"smoke": size, "default": size},
        make_inputs=lambda size, seed, dtype: args,
        reference=lambda inputs: _host(
            _set_up_then(setups.get(reference), functions[reference], inputs)
        ),
        check=_check(tolerance),
        work=lambda size, dtype: units,
        backends=backends,
        throughput_unit=next(iter(units)),
        dtypes=("float64", "float32"),
        baseline=reference,
    )


def _dtype() -> str:
    import jax

    return "float64" if jax.config.jax_enable_x64 else "float32"


def _environment(probes: bool) -> dict[str, Any]:
    """This process's environment and, with probes, the unit costs of the decomposition."""

    environment = collect(measure_bandwidth=False)
    if probes:
        environment["overheads"] = measure_all()
    return environment


def _measure_here(scenario: Scenario, key: str, timing: TimingConfig, probes: bool) -> Record:

    return measure(
        scenario,
        scenario.backend(key),
        scenario.size("default"),
        Target(_dtype()),
        timing,
        probes=probes,
        configure_x64=False,
    )


def _measure_isolated(
    source: str, scenario: Scenario, key: str, timing: TimingConfig, probes: bool, timeout_s: float
) -> Record:
    """``key`` measured in a fresh worker process, exactly as a `scanbench run` cell is:
    the cell's scenario source is the pickled scenario (`scanbench.sources.write_pickled`)."""
    cell = Cell(scenario.name, key, "default", _dtype(), 0, source)
    environ = with_import_root(os.environ, os.getcwd())  # as `python -m` would from here
    return run_cell_in_worker(cell, timing, timeout_s, probes, environ=environ)


def compare(
    functions: Mapping[str, Callable[..., Any]],
    *args: Any,
    reference: str | None = None,
    strategies: Mapping[str, str] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    work: Mapping[str, float] | None = None,
    timing: TimingConfig | None = None,
    probes: bool = True,
    isolate: bool = False,
    name: str = NAME,
    timeout_s: float = 900.0,
    setup: Callable[[], Any] | Mapping[str, Callable[[], Any]] | None = None,
    check: bool = True,
    min_samples: int | None = None,
):
    """Time, check, count and diagnose each function on ``args`` (see the module doc).

    Args:
        functions: name -> function; each is called as ``function(*args)``.
        reference: the function whose output the others must match, and that speedups are
            given against (default: the first).
        strategies: name -> ``sequential | vmapped | scanned | numba | library |
            sharded`` for names that do not contain one of those words.
        rtol, atol: the tolerance of the output check (see `Tolerance`).
        work: units of work per call for the throughput column (default ``calls: 1``).
        timing: the sampling settings (`scanbench.timing.TimingConfig`; default: the CLI's).
        probes: count dispatches, kernels, transfers and memory, and decompose the time.
        isolate: each function in a fresh worker process (needs picklable functions).
        setup: run before every call, untimed (a callable for every function, or
            ``{name: callable}``): restores the state of a function that keeps one (an
            optimizer that advances on each call), so every call does the same work.
        check: False times the functions without comparing their outputs with the
            reference's (a function whose output changes by design); the table and the
            reports say "unchecked".
        min_samples: at least this many timed calls whatever the time budget (a call of
            seconds is otherwise timed once, with no interval).

    Returns:
        A `pandas.DataFrame` indexed by function name (`COLUMNS`; times in seconds,
        shares in percent); ``attrs``: ``run`` (write it with `report`), ``isolation``,
        ``tolerance``.
    """
    reference = reference or next(iter(functions), "")
    tolerance = Tolerance(rtol, atol)
    scenario = scenario_of(
        functions, args, reference, strategies, tolerance, work, name, setup, check
    )
    timing = timing or TimingConfig()
    if min_samples is not None:
        timing = dataclasses.replace(
            timing, min_samples=min_samples, max_count=max(timing.max_count, min_samples)
        )
    environment = _environment(probes)
    records = []
    with tempfile.TemporaryDirectory(prefix="scanbench-functions-") as tmp:
        if isolate:  # one pickle of the scenario, which every function's worker loads
            pickled = write_pickled({"SCENARIO": scenario}, Path(tmp, "scenario.pkl"))
        for key in functions:
            if isolate:
                source = f"{pickled}:SCENARIO"
                record = _measure_isolated(source, scenario, key, timing, probes, timeout_s)
            else:
                record = _measure_here(scenario, key, timing, probes)
            records.append(decomposed(with_stats(record, timing.confidence), environment))
    facts = ScenarioFacts(
        f"<in-memory: {name}>", scenario.throughput_unit, reference, scenario.description
    )
    invocation = {
        "api": "scanbench.functions.compare",
        "isolation": ISOLATION[isolate],
        "tolerance": tolerance.describe(),
        "timing": dataclasses.asdict(timing),
        "scenarios": {name: facts.to_json()},
    }
    run = Run(environment, invocation, tuple(records))
    frame = records_frame([run]).set_index("backend")
    frame.index.name = "function"
    frame["notes"] = [notes(row) for row in frame.itertuples()]
    table = frame[[column for column in COLUMNS if column in frame]].copy()
    table.attrs.update(run=run, isolation=ISOLATION[isolate], tolerance=tolerance.describe())
    return table


def notes(row: Any) -> str:
    """What a reader must know before trusting a row's time: too few samples for an
    interval, an unchecked output, a function that is not jitted."""
    found = []
    samples = getattr(row, "samples", None)
    if samples is not None and samples == samples and samples < MIN_SAMPLES:
        found.append(f"n={int(samples)}: no interval (min_samples= asks for more)")
    if not getattr(row, "checked", True):
        found.append("unchecked")
    if getattr(row, "engine", "") == NOT_JITTED:
        found.append("not jitted")
    return "; ".join(found)


@dataclasses.dataclass(frozen=True)
class Profile:
    """One function, measured: its row, counts, dispatches by function and diagnosis."""

    row: Any  # pandas.Series: the function's row of `compare`
    record: Record
    dispatches_by_function: Mapping[str, float]
    diagnosis: tuple[Any, ...]  # scanbench.diagnosis.Finding, the dominant cost first
    isolation: str

    @property
    def counts(self) -> dict[str, float | None]:
        """Per call: dispatches, kernels, launch equivalents, transfers, compilations..."""
        return self.record.counts.per_call()

    def text(self) -> str:
        median = self.row.get("median_s")
        note = self.row.get("notes") or ""
        lines = [
            f"{self.record.backend}: median {median:.6g} s ({self.isolation})"
            + (f"; {note}" if note else "")
            if median == median and median is not None
            else f"{self.record.backend}: {self.record.status} {self.record.error or ''}",
            "per call: " + ", ".join(f"{k} {v:g}" for k, v in self.counts.items() if v is not None),
            "dispatches by function: "
            + ", ".join(f"{k} {v:g}" for k, v in self.dispatches_by_function.items()),
            *(f"diagnosis: {finding.text()}" for finding in self.diagnosis),
        ]
        return "\n".join(lines)


def profile(function: Callable[..., Any], *args: Any, name: str | None = None, **options):
    """`compare` of one function (its own reference: the check is that its output is
    finite and the same after repeated calls), returned as a `Profile`."""

    key = name or getattr(function, "__name__", "function")
    options.setdefault("strategies", {key: options.pop("strategy", "library")})
    table = compare({key: function}, *args, reference=key, **options)
    run = table.attrs["run"]
    (record,) = run.records
    row = table.loc[key]
    facts = facts_of(record, run.environment)
    return Profile(
        row=row,
        record=record,
        dispatches_by_function=record.counts.breakdowns()["dispatches_by_function"],
        diagnosis=diagnose(facts) if facts is not None else (),
        isolation=table.attrs["isolation"],
    )


def report(result: Any, md: str | None = None, html: str | None = None) -> str:
    """The markdown report of a `compare` table or a `Profile` (returned), written to
    ``md`` and, as HTML with plots, to ``html`` when given."""
    run = result.attrs["run"] if hasattr(result, "attrs") else None
    if run is None and isinstance(result, Profile):
        raise InputError("report a compare() table; a Profile prints with .text()")
    if run is None:
        raise InputError("report() takes the DataFrame that compare() returned")
    return write_reports([run], (), md, html)

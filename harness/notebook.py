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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pandas as pd

from scanbench.reports.frame import NOT_JITTED, records_frame, without_interval
from scanbench.reports.growth_section import growth_sections
from scanbench.reports.traced_call import kernel_lines, loop_lines
from scanbench.reports.written import write_reports

from .api import (
    Axis,
    Backend,
    HarnessError,
    InputError,
    MismatchError,
    Record,
    Scenario,
    Size,
    Strategy,
)
from .cells import Cell
from .checks import leaf_path
from .counts import Counts
from .diagnosis import diagnose, facts_of
from .donation import Donated, check_declared
from .environment import collect
from .execution.launcher import decomposed, profile_in_worker, run_cell_in_worker, with_stats
from .execution.worker import Target, measure, profile_backend
from .factories import loop_backend
from .growth.analysis import SweepAnalysis
from .growth.budget import DEFAULT_BUDGET_S
from .growth.in_process import sweep_functions
from .growth.points import Sweep
from .import_path import with_import_root
from .invocation import Growth, Invocation, NotebookCall, ScenarioFacts, Stage
from .probes.overheads import measure_all
from .probes.rates import measure_rates
from .results import Run
from .sampling import TimingConfig
from .sources import pickle_directory, write_pickled
from .trace_route import TraceFiles, TraceRoute

NAME = "functions"
API = "scanbench.notebook.compare"  # the stored invocation's origin
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
    "compile_trace_s",
    "compile_lower_s",
    "compile_xla_s",
    "cores",
    "disturbed",
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
    donate: tuple[int, ...] = (),
) -> Backend:
    jitted = hasattr(function, "lower")

    def prepare(args: tuple, size: Size) -> dict[str, Any]:
        compiled = donated = None
        if donate:  # on the device: only a device buffer can be donated
            import jax

            args = tuple(jax.device_put(a) if i in donate else a for i, a in enumerate(args))
        if jitted:  # the compile time, measured apart from the first call
            try:
                compiled = function.lower(*args).compile()
            except Exception:  # static arguments it cannot lower as given: first call
                compiled = None
        if compiled is not None:
            check_declared(name, compiled, args, donate)
        if donate:
            donated = Donated(args, donate, name)
        return {"args": args, "compiled": compiled, "donated": donated}

    def run(prepared: dict[str, Any]) -> Any:
        held = prepared["donated"]
        return function(*(prepared["args"] if held is None else held.call_args()))

    def set_up(prepared: dict[str, Any]) -> None:
        if prepared["donated"] is not None:
            prepared["donated"].refresh()
        if setup is not None:
            setup()

    def executables(prepared: dict[str, Any]) -> dict[str, Any]:
        compiled = prepared["compiled"]
        return {name: (compiled, 1)} if compiled is not None else {}

    return loop_backend(
        name,
        strategy,
        prepare,
        run,
        engine="jax" if jitted else NOT_JITTED,
        description=getattr(function, "__doc__", None) or "",
        executables=executables if jitted else None,
        setup=None if setup is None and not donate else set_up,
        checked=checked,
        donate=donate,
    )


def _donations(
    donate: Sequence[int] | Mapping[str, Sequence[int]] | None,
    functions: Mapping[str, Callable[..., Any]],
    count: int,
) -> dict[str, tuple[int, ...]]:
    """Each function's donated argument positions (``donate=`` of `compare`), checked."""
    if donate is None:
        return dict.fromkeys(functions, ())
    given = dict(donate) if isinstance(donate, Mapping) else dict.fromkeys(functions, donate)
    unknown = set(given) - set(functions)
    if unknown:
        raise InputError(
            f"donate names no function: {', '.join(sorted(map(str, unknown)))}; "
            f"choose among {', '.join(functions)}"
        )
    out = dict.fromkeys(functions, ())
    for key, positions in given.items():
        if isinstance(positions, int):
            positions = (positions,)
        positions = tuple(positions)
        bad = [p for p in positions if not isinstance(p, int) or not 0 <= p < count]
        if bad:
            raise InputError(
                f"donate[{key!r}] = {positions!r}: positions must be integers in "
                f"0..{count - 1} (the {count} arguments given)"
            )
        out[key] = positions
    return out


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
    donate: Sequence[int] | Mapping[str, Sequence[int]] | None = None,
) -> Scenario:
    """The in-memory scenario of ``functions`` on ``args`` (see the module doc);
    ``setup``: one callable for every function, or one per function name; ``donate``:
    the positions of the arguments every function donates, or one tuple per name."""
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
    donations = _donations(donate, functions, len(args))
    backends = {
        key: _backend(
            key, function, _strategy(key, strategies), setups.get(key), check, donations[key]
        )
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
    return "float64" if jax.config.jax_enable_x64 else "float32"


def _environment(probes: bool) -> dict[str, Any]:
    """This process's environment and, with probes, the unit costs of the decomposition."""

    environment = collect(measure_bandwidth=False)
    if probes:
        environment["overheads"] = measure_all()
        # the cost of a page fault and of a call; no arithmetic rate (Numba: seconds)
        environment["rates"] = measure_rates(environment["platform"], arithmetic=False)
    return environment


def _measure_here(
    scenario: Scenario, key: str, timing: TimingConfig, probes: bool, size: str = "default"
) -> Record:

    return measure(
        scenario,
        scenario.backend(key),
        scenario.size(size),
        Target(_dtype()),
        timing,
        probes=probes,
        configure_x64=False,
    )


def _measure_isolated(
    source: str,
    scenario: Scenario,
    key: str,
    timing: TimingConfig,
    probes: bool,
    timeout_s: float,
    size: str = "default",
) -> Record:
    """``key`` measured in a fresh worker process, exactly as a `scanbench run` cell is:
    the cell's scenario source is the pickled scenario (`scanbench.sources.write_pickled`)."""
    cell = Cell(scenario.name, key, size, _dtype(), 0, source)
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
    donate: Sequence[int] | Mapping[str, Sequence[int]] | None = None,
    min_samples: int | None = None,
    grow: Mapping[str, Sequence[int] | Mapping[int, Any]] | None = None,
    args_for: Callable[[int], Any] | None = None,
    grow_budget_s: float = DEFAULT_BUDGET_S,
) -> pd.DataFrame:
    """Time, check, count and diagnose each function on ``args`` (see the module doc).

    Args:
        functions: name -> function; each is called as ``function(*args)``.
        reference: the function whose output the others must match, and that speedups are
            given against (default: the first).
        strategies: name -> ``sequential | vmapped | scanned | numba | library |
            sharded`` for names that do not contain one of those words.
        rtol: the relative tolerance of the output check (see `Tolerance`).
        atol: the absolute tolerance of the output check.
        work: units of work per call for the throughput column (default ``calls: 1``).
        timing: the sampling settings (`scanbench.sampling.TimingConfig`; default: the CLI's).
        probes: count dispatches, kernels, transfers and memory, and decompose the time.
        isolate: each function in a fresh worker process (needs picklable functions).
        setup: run before every call, untimed (a callable for every function, or
            ``{name: callable}``): restores the state of a function that keeps one (an
            optimizer that advances on each call), so every call does the same work.
        check: False times the functions without comparing their outputs with the
            reference's (a function whose output changes by design); the table and the
            reports say "unchecked".
        donate: the positions of the arguments the functions donate (compiled with
            ``jax.jit(..., donate_argnums=...)``): one tuple for every function, or
            ``{name: positions}``. Each call gets fresh device copies of them, made
            untimed, and the donation is checked and counted (`scanbench.donation`).
        min_samples: at least this many timed calls whatever the time budget (a call of
            seconds is otherwise timed once, with no interval).
        grow: how the cost grows: ``{axis: [values]}`` with ``args_for(value)`` giving
            each point's arguments (a tuple, or one argument), or ``{axis: {value:
            arguments}}``; instead of ``args``. Each function is measured at each value
            (integers >= 1), its time fitted as fixed + per unit x value^k, and where two
            functions' fits cross, measured once more there (with ``args_for``: at any
            value; with a dict: at the values it has). See `compare_grown`.
        args_for: with ``grow={axis: [values]}``: value -> that point's arguments.
        grow_budget_s: with ``grow``: a point where one call of a function is predicted,
            from its points before, to take longer than this is skipped (and listed).

    Returns:
        One row per function, indexed by its name (`COLUMNS`; times in seconds,
            shares in percent), whose ``attrs`` hold ``run`` (write it with `report`),
            ``isolation`` and ``tolerance``; with ``grow``, the fitted costs instead
            (`compare_grown`).
    """
    reference = reference or next(iter(functions), "")
    tolerance = Tolerance(rtol, atol)
    timing = timing or TimingConfig()
    if min_samples is not None:
        timing = dataclasses.replace(
            timing, min_samples=min_samples, max_count=max(timing.max_count, min_samples)
        )
    if grow is not None or args_for is not None:
        if args:
            raise InputError("compare(grow=...) takes each point's arguments from grow; drop args")
        points = grow_points(grow, args_for)
        options = {"strategies": strategies, "tolerance": tolerance, "work": work, "name": name}
        options.update(setup=setup, check=check, timing=timing, probes=probes, isolate=isolate)
        options.update(donate=donate)
        return compare_grown(functions, points, reference, grow_budget_s, timeout_s, **options)
    scenario = scenario_of(
        functions, args, reference, strategies, tolerance, work, name, setup, check, donate
    )
    environment = _environment(probes)
    records = []
    with pickle_directory() as tmp:
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
    call = NotebookCall(API, ISOLATION[isolate], tolerance.describe(), timing)
    invocation = Invocation({name: facts}, origin=call)
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
    width = getattr(row, "rel_width", None)
    if samples is not None and samples == samples and without_interval(samples, width):
        found.append(f"n={int(samples)}: no interval (min_samples= asks for more)")
    if not getattr(row, "checked", True):
        found.append("unchecked")
    if getattr(row, "engine", "") == NOT_JITTED:
        found.append("not jitted")
    return "; ".join(found)


@dataclasses.dataclass(frozen=True)
class Profile:
    """One function, measured: its row, counts, dispatches by function and diagnosis, and
    the trace of one call when `profile` was asked for one."""

    row: Any  # pandas.Series: the function's row of `compare`
    record: Record
    dispatches_by_function: Mapping[str, float]
    diagnosis: tuple[Any, ...]  # scanbench.diagnosis.Finding, the dominant cost first
    isolation: str
    trace: TraceFiles | None = None  # ``profile(..., trace=...)``: where it was written

    @property
    def counts(self) -> dict[str, float | None]:
        """Per call: dispatches, kernels, launch equivalents, transfers, compilations..."""
        return self.record.counts.per_call()

    def text(self, top: int = 5) -> str:
        """Its time, counts per call, busiest kernels, compiled loops (kernels per
        iteration), the trace's paths when written, and the diagnosis; ``top``: how many
        kernels to list."""
        median = self.row.get("median_s")
        note = self.row.get("notes") or ""
        kernels = self.record.counts.breakdowns()["kernels_by_op"]
        lines = [
            f"{self.record.backend}: median {median:.6g} s ({self.isolation})"
            + (f"; {note}" if note else "")
            if median == median and median is not None
            else f"{self.record.backend}: {self.record.status} {self.record.error or ''}",
            "per call: " + ", ".join(f"{k} {v:g}" for k, v in self.counts.items() if v is not None),
            "dispatches by function: "
            + ", ".join(f"{k} {v:g}" for k, v in self.dispatches_by_function.items()),
            *(kernel_lines(kernels, top) if kernels else []),
            *loop_lines(self.record.counts.static),
        ]
        if self.trace is not None:
            lines += [f"trace of one call: {self.trace.directory}", *self.trace.lines()]
        lines += [f"diagnosis: {finding.text()}" for finding in self.diagnosis]
        return "\n".join(lines)


def _trace_directory(trace: str | os.PathLike[str] | bool, key: str) -> Path | None:
    """Where ``profile(trace=...)`` writes: a folder given, ``results/profile-<name>``
    for True, None for False."""
    if trace is False or trace is None:
        return None
    if trace is True:
        return Path("results", f"profile-{key}")
    if isinstance(trace, str | os.PathLike) and str(trace):
        return Path(trace)
    raise InputError(
        f"trace={trace!r}: give a folder to write the trace into, True for "
        f"results/profile-{key}, or False"
    )


def _trace(
    scenario: Scenario, key: str, directory: Path, isolate: bool, timeout_s: float
) -> TraceFiles:
    """One checked call of ``key`` traced into ``directory``, by the code `scanbench
    profile` runs (`scanbench.execution.worker.profile_backend`): in a fresh worker with
    ``isolate``, as `compare` measured it, else in this process."""
    directory.mkdir(parents=True, exist_ok=True)
    log_dir = str(directory.resolve())
    if isolate:
        with pickle_directory() as tmp:
            pickled = write_pickled({"SCENARIO": scenario}, Path(tmp, "scenario.pkl"))
            cell = Cell(scenario.name, key, "default", _dtype(), 0, f"{pickled}:SCENARIO")
            environ = with_import_root(os.environ, os.getcwd())  # as _measure_isolated
            data = profile_in_worker(cell, log_dir, timeout_s, environ=environ)
    else:
        size, backend = scenario.size("default"), scenario.backend(key)
        data = profile_backend(scenario, backend, size, Target(_dtype()), log_dir)
    error = Counts.from_json(data).errors.get("trace")
    if error:
        raise HarnessError(f"the trace of {key} failed: {error}")
    return TraceFiles.found(log_dir)


def profile(
    function: Callable[..., Any],
    *args: Any,
    name: str | None = None,
    trace: str | os.PathLike[str] | bool = False,
    **options,
):
    """`compare` of one function (its own reference: the check is that its output is
    finite and the same after repeated calls), returned as a `Profile`.

    Args:
        function: called as ``function(*args)``.
        name: how the table and the diagnosis name it (default: its ``__name__``).
        trace: a folder to write a Perfetto and XProf trace of one call into (True:
            ``results/profile-<name>``), as ``scanbench profile`` does for a cell; the
            call is checked first, and traced in a fresh worker with ``isolate=True``.
            ``Profile.trace`` and ``text()`` give its paths, and the diagnosis points at
            it. Without one, the diagnosis says how to ask for it.
        **options: those of `compare` (``strategy=`` for ``strategies``).

    Example:
        >>> measured = profile(scan, xs, trace="trace")
        >>> print(measured.trace.perfetto)  # open it in ui.perfetto.dev
    """

    key = name or getattr(function, "__name__", "function")
    directory = _trace_directory(trace, key)
    options.setdefault("strategies", {key: options.pop("strategy", "library")})
    table = compare({key: function}, *args, reference=key, **options)
    run = table.attrs["run"]
    (record,) = run.records
    row = table.loc[key]
    files = None
    if directory is not None:
        scenario = scenario_of(
            {key: function},
            args,
            key,
            options["strategies"],
            Tolerance(options.get("rtol"), options.get("atol")),
            options.get("work"),
            options.get("name", NAME),
            options.get("setup"),
            options.get("check", True),
            options.get("donate"),
        )
        isolate, timeout_s = options.get("isolate", False), options.get("timeout_s", 900.0)
        files = _trace(scenario, key, directory, isolate, timeout_s)
    route = TraceRoute.python(key) if files is None else TraceRoute.at(files.directory)
    facts = facts_of(record, run.environment, route)
    return Profile(
        row=row,
        record=record,
        dispatches_by_function=record.counts.breakdowns()["dispatches_by_function"],
        diagnosis=diagnose(facts) if facts is not None else (),
        isolation=table.attrs["isolation"],
        trace=files,
    )


def report(result: Any, md: str | None = None, html: str | None = None) -> str:
    """The markdown report of a `compare` table (returned), written to ``md`` and, as HTML
    with plots, to ``html`` when given. A `Profile` is refused: it prints with ``.text()``."""
    run = result.attrs["run"] if hasattr(result, "attrs") else None
    if run is None and isinstance(result, Profile):
        raise InputError("report a compare() table; a Profile prints with .text()")
    if run is None:
        raise InputError("report() takes the DataFrame that compare() returned")
    return write_reports([run], (), md, html)


@dataclasses.dataclass(frozen=True)
class GrowPoints:
    """``compare(grow=...)``'s points: the axis, its values, each value's arguments."""

    axis: str
    values: tuple[int, ...]
    arguments: Callable[[int], tuple]
    confirmable: Callable[[int], bool]  # whether arguments can be made at another value


def grow_points(
    grow: Mapping[str, Sequence[int] | Mapping[int, Any]] | None,
    args_for: Callable[[int], Any] | None,
) -> GrowPoints:
    """``grow`` and ``args_for`` checked (`InputError` naming what is wrong and the forms)."""
    forms = "grow={'n': [10, 100, 1000]} with args_for=lambda n: (...), or {'n': {10: args}}"
    if not isinstance(grow, Mapping) or len(grow) != 1:
        raise InputError(f"grow must name one axis and its values: {forms}")
    ((axis, points),) = grow.items()
    if not (isinstance(axis, str) and axis.isidentifier()):
        raise InputError(f"grow: the axis must be a name (a word), got {axis!r}")
    given = dict(points) if isinstance(points, Mapping) else None
    values = list(given if given is not None else points)
    whole = all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values)
    if not whole or len(set(values)) < 2:
        raise InputError(f"grow[{axis!r}]: give 2 or more distinct integers >= 1, got {values!r}")
    if (given is None) == (args_for is None):
        raise InputError(f"give either args_for= or each value's arguments: {forms}")
    made: dict[int, tuple] = {}

    def arguments(value: int) -> tuple:
        if value not in made:  # made once per value, untimed
            found = given[value] if given is not None else args_for(value)
            made[value] = found if isinstance(found, tuple) else (found,)
        return made[value]

    confirmable = (lambda value: True) if given is None else (lambda value: value in given)
    return GrowPoints(axis, tuple(sorted(set(values))), arguments, confirmable)


def _grown_scenario(
    functions: Mapping[str, Callable[..., Any]], points: GrowPoints, reference: str, **options
) -> Scenario:
    """The in-memory scenario of `scenario_of`, with one axis: each size's arguments are
    its point's (``work``: per call, a mapping or a callable of the value; default
    ``{axis: value}``)."""
    axis, first = points.axis, points.values[0]
    work = options.pop("work")
    if callable(work):
        units = work
    else:
        units = (lambda value: dict(work)) if work else (lambda value: {axis: float(value)})
    scenario = scenario_of(
        functions, points.arguments(first), reference, work=units(first), **options
    )
    size = Size("default", {axis: first}, f"the first point, {axis} = {first}")
    return dataclasses.replace(
        scenario,
        description=f"{len(functions)} functions along {axis} = {first}..{points.values[-1]}",
        sizes={"smoke": size, "default": size},
        make_inputs=lambda size, seed, dtype: points.arguments(size[axis]),
        work=lambda size, dtype: units(size[axis]),
        axes={axis: Axis(axis, axis, "grown by compare(grow=...)")},
    )


def compare_grown(
    functions: Mapping[str, Callable[..., Any]],
    points: GrowPoints,
    reference: str,
    budget_s: float,
    timeout_s: float,
    timing: TimingConfig,
    probes: bool,
    isolate: bool,
    **options,
) -> pd.DataFrame:
    """`compare` along an axis (``grow=``): every function at every point, fitted, its
    crossovers measured; the same analysis as ``scanbench run --grow``
    (`scanbench.growth`).

    Returns:
        A `pandas.DataFrame` indexed by function name: ``fixed_s``, ``per_unit_s``,
        ``exponent`` (and each one's ``_low``/``_high`` 95% bounds), ``rms`` (of the
        relative residuals), ``points`` fitted, ``skipped``, and each count per call that
        is an exact line as ``<count>_fixed`` and ``<count>_per_unit``. ``attrs``:
        ``run`` (write it with `report`: the growth section, its plot), ``points`` (one
        row per function and value: median, interval, status), ``crossovers`` and
        ``trends`` (sentences), ``growth`` (the analysis), ``isolation``, ``tolerance``.
    """
    if not (isinstance(budget_s, int | float) and budget_s > 0):
        raise InputError(f"grow_budget_s must be a number of seconds > 0, got {budget_s!r}")
    scenario = _grown_scenario(functions, points, reference, **options)
    environment = _environment(probes)
    sweep = Sweep(
        scenario=scenario.name,
        source=f"<in-memory: {scenario.name}>",
        axis=points.axis,
        param=points.axis,
        unit=points.axis,
        base="default",
        base_value=points.values[0],
        values=points.values,
        dtype=_dtype(),
    )
    with pickle_directory() as tmp:
        if isolate:
            source = f"{write_pickled({'SCENARIO': scenario}, Path(tmp, 'scenario.pkl'))}:SCENARIO"

        def measure_one(key: str, size: str) -> Record:
            if isolate:
                record = _measure_isolated(source, scenario, key, timing, probes, timeout_s, size)
            else:
                record = _measure_here(scenario, key, timing, probes, size)
            return decomposed(with_stats(record, timing.confidence), environment)

        records, analysis = sweep_functions(
            scenario, sweep, measure_one, budget_s, points.confirmable, timing.confidence
        )
    tolerance = options.get("tolerance") or Tolerance()
    facts = ScenarioFacts(sweep.source, scenario.throughput_unit, reference, scenario.description)
    growth = Growth((sweep,), budget_s, Stage.DONE, (analysis.to_json(),))
    call = NotebookCall(API, ISOLATION[isolate], tolerance.describe(), timing)
    invocation = Invocation({scenario.name: facts}, growth=growth, origin=call)
    run = Run(environment, invocation, tuple(records))
    (section,) = growth_sections([run])
    table = fits_frame(analysis)
    table.attrs.update(
        run=run,
        points=points_frame(analysis),
        crossovers=list(section.crossovers),
        trends=list(section.trends),
        growth=analysis,
        isolation=ISOLATION[isolate],
        tolerance=tolerance.describe(),
    )
    return table


def fits_frame(analysis: SweepAnalysis):
    """One row per function: its fitted costs and exact count lines (`compare_grown`)."""
    rows = {}
    for line in analysis.lines:
        row: dict[str, Any] = {"points": 0, "skipped": sum(p.status != "ok" for p in line.points)}
        fit = line.fit
        if fit is not None:
            row.update(
                fixed_s=fit.fixed_s,
                fixed_low_s=fit.fixed_interval[0],
                fixed_high_s=fit.fixed_interval[1],
                per_unit_s=fit.per_unit_s,
                per_unit_low_s=fit.per_unit_interval[0],
                per_unit_high_s=fit.per_unit_interval[1],
                exponent=fit.exponent,
                exponent_fitted=fit.exponent_fitted,
                rms=fit.rms,
                points=fit.points,
            )
        for count in line.counts:
            if count.linear:
                row[f"{count.name}_fixed"] = count.fixed
                row[f"{count.name}_per_unit"] = count.per_unit
        rows[line.label] = row
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = "function"
    return frame


def points_frame(analysis: SweepAnalysis):
    """One row per function and point: the value, status, median and its interval."""
    axis = analysis.sweep.axis
    rows = [
        {
            "function": line.label,
            axis: point.units,
            "status": point.status,
            "median_s": point.median_s,
            "ci_low_s": point.low_s,
            "ci_high_s": point.high_s,
            "added": point.added,
            "note": point.note,
        }
        for line in analysis.lines
        for point in line.points
    ]
    return pd.DataFrame(rows)

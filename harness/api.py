"""The public vocabulary of scanbench: Size, Strategy, Backend, Scenario, Record, errors.

A *scenario* is a workload (inputs, a reference answer, a correctness check, units of
work) plus a plain dict of *backends*: interchangeable ways to compute the same answer.
A backend is data plus two functions: ``prepare(inputs, size)`` (untimed: device
placement, compilation) and ``run(prepared)`` (timed; returns only when the result is
ready). Users bring their own workloads by writing a Python file that defines
``SCENARIO = Scenario(...)`` and passing it to ``scanbench run --scenario-file``.

Example:
    >>> from scanbench import Backend, Strategy
    >>> double = Backend(
    ...     name="numpy-double", strategy=Strategy.SEQUENTIAL, engine="numpy",
    ...     prepare=lambda inputs, size: inputs, run=lambda x: 2 * x,
    ... )
"""

from __future__ import annotations

import dataclasses
import enum
import types
from collections.abc import Callable, Mapping
from typing import Any

from .counts import Counts
from .errors import (
    HarnessError,
    InputError,
    MismatchError,
    StoreError,
    UnknownNameError,
)
from .xla_options import check_declared

__all__ = [
    "DTYPES",
    "Axis",
    "Backend",
    "Counts",
    "HarnessError",
    "InputError",
    "MismatchError",
    "Param",
    "Record",
    "Scenario",
    "Size",
    "Status",
    "StoreError",
    "Strategy",
    "UnknownNameError",
]


class Strategy(enum.StrEnum):
    """How a backend organises the loop; the axis scanbench is about."""

    SEQUENTIAL = "sequential"  # Python loop, one call per item (the real-world pattern)
    VMAPPED = "vmapped"  # one jitted call over the batch per step
    SCANNED = "scanned"  # the whole loop inside one jitted lax.scan
    NUMBA = "numba"  # CPU reference compiled by Numba
    LIBRARY = "library"  # a well-kept library's own solver
    SHARDED = "sharded"  # the batch split over devices with jax.sharding
    ROOFLINE = "roofline"  # the scenario's arithmetic alone, hand-written: a limit, not a rival


DTYPES = ("float32", "float64")
WARM, COLD = "warm", "cold"
CACHE_MODES = (WARM, COLD)  # cold: the caches evicted before every timed sample


@dataclasses.dataclass(frozen=True)
class Size:
    """A named, frozen set of workload parameters (``size["batch"]``)."""

    name: str
    params: Mapping[str, Any]
    description: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", types.MappingProxyType(dict(self.params)))

    def __getitem__(self, key: str) -> Any:
        try:
            return self.params[key]
        except KeyError:
            raise UnknownNameError("size parameter", key, sorted(self.params), self.name) from None


def _identity(output: Any) -> Any:
    return output


@dataclasses.dataclass(frozen=True)
class Param:
    """A keyword parameter of a backend (see `Backend.params`).

    Attributes:
        default: the value the backend is registered with (its kind: int, float or str).
        choices: the allowed values, or None for any value of the default's kind (ints
            must be >= 1: block sizes, unroll factors).
        description: one line for ``scanbench list``.
    """

    default: int | float | str
    choices: tuple[Any, ...] | None = None
    description: str = ""

    def parse(self, text: str, name: str, backend: str) -> int | float | str:
        """A value given on the command line, as the default's kind, checked."""
        kind = type(self.default)
        try:
            value = kind(text)
        except ValueError:
            raise InputError(
                f"--param {name}={text}: backend {backend!r} takes a {kind.__name__}"
            ) from None
        self.check(value, backend, name)
        return value

    def check(self, value: Any, backend: str, name: str = "") -> None:
        label = f"--param {name}={value}" if name else f"parameter value {value!r}"
        if self.choices is not None and value not in self.choices:
            raise UnknownNameError("value", str(value), [str(c) for c in self.choices], label)
        if self.choices is None and isinstance(self.default, int) and value < 1:
            raise InputError(f"{label}: backend {backend!r} takes an int >= 1")


def cache_suffix(cache: str) -> str:
    """`` [cold]`` for a cell timed with cold caches (nothing for the warm default)."""
    return "" if cache == WARM else f" [{cache}]"


def param_suffix(params: Mapping[str, Any]) -> str:
    """``[block=2000,unroll=2]``: a cell's or record's backend parameters as its label
    shows them (empty without parameters)."""
    if not params:
        return ""
    return "[" + ",".join(f"{name}={value}" for name, value in sorted(params.items())) + "]"


GROWN = "@"  # a grown size's name: BASE@AXIS=VALUE (`grown_size_name`)


def grown_size_name(base: str, axis: str, value: int) -> str:
    """The name of size ``base`` with axis ``axis`` set to ``value``: ``default@population=8``
    (`Scenario.size` resolves it; see `Axis`)."""
    return f"{base}{GROWN}{axis}={value}"


def grown_parts(name: str) -> tuple[str, str, int] | None:
    """``(base, axis, value)`` of a grown size's name (`grown_size_name`); None for any
    other name."""
    base, at, rest = name.partition(GROWN)
    axis, equals, value = rest.partition("=")
    if not (at and equals and base and axis) or not value.isdigit():
        return None
    return base, axis, int(value)


@dataclasses.dataclass(frozen=True)
class Axis:
    """A direction in which a scenario's work grows: one integer size parameter.

    ``scanbench run --grow AXIS=START..STOP`` measures every backend at sizes derived from
    the base size (``--size``) with this parameter changed; the size derived at value v is
    named ``BASE@AXIS=v`` (`grown_size_name`) and can be given to ``--size`` like any other.

    Attributes:
        param: the size parameter it changes (an int >= ``minimum`` in every size).
        unit: what one unit of it is, for "cost per unit" (``candidates``, ``systems``).
        description: one line for the reports.
        minimum: the smallest value a size may take along it.
        derive: optional ``derive(base, value) -> params``: the parameters of the size
            derived from ``base`` at ``value``, when more than the one parameter must change
            with it; default: ``base``'s parameters with ``param`` set to ``value``.

    Example:
        ``axes={"population": Axis("population", "candidates", "P, per generation")}``
    """

    param: str
    unit: str
    description: str = ""
    minimum: int = 1
    derive: Callable[[Size, int], Mapping[str, Any]] | None = None

    def params(self, base: Size, value: int) -> dict[str, Any]:
        """The parameters of the size derived from ``base`` at ``value`` (checked)."""
        if isinstance(value, bool) or not isinstance(value, int) or value < self.minimum:
            raise InputError(f"axis {self.param!r} takes integers >= {self.minimum}, got {value!r}")
        if self.derive is None:
            return {**base.params, self.param: value}
        derived = dict(self.derive(base, value))
        if derived.get(self.param) != value:
            raise InputError(
                f"axis {self.param!r}: derive(base, {value}) must set {self.param} = {value}, "
                f"got {derived.get(self.param)!r}"
            )
        return derived


CHAINS = ("serial", "interleaved")  # how a backend runs dependent chains (Backend.chains)


@dataclasses.dataclass(frozen=True)
class Backend:
    """One way to compute a scenario's answer.

    Attributes:
        name: the CLI name, unique within its scenario.
        strategy: which loop organisation it represents.
        engine: what executes it: ``jax``, ``numpy``, ``numba`` or ``scipy``.
        prepare: ``prepare(inputs, size) -> prepared``; untimed (placement, compile).
        run: ``run(prepared) -> output``; timed; must return a ready result.
        description: one line for ``scanbench list`` and the reports.
        to_reference: untimed conversion of the output to the reference's layout (e.g. a
            time-major result transposed back); identity by default.
        sizes: size names this backend runs at; ``None`` means all. At other sizes the
            runner stores a *skipped* record carrying ``skip_reason``.
        skip_reason: why the backend does not run at the other sizes.
        executables: optional ``executables(prepared) -> {name: (compiled, calls_per_run)}``
            giving the compiled JAX executables one ``run`` launches (for the static HLO
            kernel estimate); ``jax_backend`` fills it in.
        estimate: optional ``estimate(inputs, size) -> {"estimated_s": ...}``: a partial
            run extrapolated to a whole one, stored with a *skipped* record so a backend
            too slow for a size is reported with its expected cost, not dropped.
        params: the keyword parameters the backend is built with (block size, unroll,
            ...), name -> `Param` (its default and allowed values); ``scanbench run
            --param NAME=V1,V2`` runs one cell per value. `bind` builds the backend with
            other values; `scanbench.factories.parametric` fills both in.
        bind: ``bind(**values) -> Backend``: this backend built with those parameters.
        check: ``check(prepared, output) -> max_error``, for a backend whose output is
            not the scenario's answer (a `Strategy.ROOFLINE` kernel computes the same
            arithmetic without the loop structure): checked against that arithmetic
            instead of the scenario's reference, as strictly (NaN, inf, a finite error).
        xla_flags: XLA flags the backend's worker process starts with (read once, when JAX
            starts: a cell's worker is a fresh process, so they reach only this backend),
            e.g. ``("--xla_backend_extra_options=xla_cpu_use_multi_output_fusion",)``.
            They are merged into the worker's ``XLA_FLAGS``
            (`scanbench.xla_options.merge`), checked against the installed jaxlib before
            the cell runs (a refused or silently ignored flag fails the cell with one
            line naming it), stored in the record and shown beside the backend in the
            reports. In-process paths
            (pytest-benchmark, the Python API) cannot apply them and say so.
        setup: ``setup(prepared)``, run untimed before every call (timed, warm-up,
            checked and counted): restores or rebuilds the state of a stateful function
            (an optimizer that advances on every call), so that each call does the same
            work on the same inputs (torch ``Timer``'s setup, pytest-benchmark's pedantic
            setup).
        checked: False times the backend without comparing its output with the
            scenario's reference (a stateful function whose output changes from call to
            call by design): the record, the reports and the gate say "unchecked".
        parallel: it uses every core of the machine (a Numba ``prange`` loop; a sharded
            backend is parallel by its strategy): its memory bound is the copy bandwidth
            of every core, not of one.
        chains: how it runs the dependent chains of a scenario that declares them
            (``work()["chains"]`` and ``work()["chain_steps"]``: a Thomas sweep per
            system): ``"serial"``, one chain's steps back to back on a core (a loop over
            systems around the sweep: each step waits for the last, so steps x the
            measured latency of one, over its cores, is a floor of its time:
            `scanbench.evidence.chain_floor`); ``"interleaved"``, several chains' steps
            in one inner loop (systems innermost, or vectorised across them: their
            latencies overlap); ``None``, not declared (no chain floor is claimed).
            Checked against the measurements: a backend declared serial that runs
            faster than its floor is declared wrong (tests/engine/test_chains.py).
        donate: the positions of the arguments its executable donates
            (``jax.jit(..., donate_argnums=...)``), declared through
            `scanbench.factories.compiled_backend` or the notebook API's ``donate=``:
            its ``setup`` then hands each call fresh copies of them, untimed, and checks
            that the previous call's copies were deleted (`scanbench.donation`).
        reducible_to: for a costly backend (an eager or Python loop) of a scenario with
            ``count_along``: at sizes with more units than this, the cell is first checked
            and timed with ``count_along`` at this many units; when ``min_count`` whole
            calls would then exceed the time budget (the warm reduced call's median x the
            work ratio x ``min_count`` > ``--max-time``),
            the cell is measured on that part of the work and its times scaled by the
            ratio, stored as measured-and-scaled (``Record.sampling["scaled"]``, "≈" in
            the reports), never silently. The part is sampled at least as often as an
            interval of its median needs (`scanbench.statistics.fewest_for_interval`).
    """

    name: str
    strategy: Strategy
    engine: str
    prepare: Callable[[Any, Size], Any]
    run: Callable[[Any], Any]
    description: str = ""
    to_reference: Callable[[Any], Any] = _identity
    sizes: frozenset[str] | None = None
    skip_reason: str = ""
    executables: Callable[[Any], Mapping[str, tuple[Any, int]]] | None = None
    estimate: Callable[[Any, Size], Mapping[str, float]] | None = None
    reducible_to: int | None = None
    params: Mapping[str, Param] = dataclasses.field(default_factory=dict)
    bind: Callable[..., Backend] | None = None
    xla_flags: tuple[str, ...] = ()
    check: Callable[[Any, Any], float] | None = None
    setup: Callable[[Any], Any] | None = None
    checked: bool = True
    parallel: bool = False
    donate: tuple[int, ...] = ()
    chains: str | None = None

    def __post_init__(self) -> None:
        if self.chains is not None and self.chains not in CHAINS:
            raise InputError(
                f"backend {self.name!r}: chains must be one of {', '.join(CHAINS)} or None, "
                f"got {self.chains!r}"
            )
        if bool(self.params) != (self.bind is not None):
            raise InputError(f"backend {self.name!r}: params and bind go together")
        check_declared(f"backend {self.name!r}", self.xla_flags)
        if self.donate and self.setup is None:
            raise InputError(
                f"backend {self.name!r}: donate={self.donate} needs a setup that hands each "
                "call fresh donated arguments (scanbench.donation.Donated.refresh)"
            )
        units = self.reducible_to
        if units is not None and (
            not isinstance(units, int) or isinstance(units, bool) or units < 1
        ):
            raise InputError(
                f"backend {self.name!r}: reducible_to must be an int >= 1, got {units!r}"
            )

    def runs_at(self, size_name: str) -> bool:
        """Whether it runs at that size (a grown size: at its base size, see `Axis`)."""
        if self.sizes is None or size_name in self.sizes:
            return True
        grown = grown_parts(size_name)
        return grown is not None and grown[0] in self.sizes

    def defaults(self) -> dict[str, Any]:
        """Each parameter's default value."""
        return {name: param.default for name, param in self.params.items()}

    def with_params(self, values: Mapping[str, Any]) -> Backend:
        """This backend built with ``values`` (each checked by its `Param`); itself when
        ``values`` is empty."""
        if not values:
            return self
        for name, value in values.items():
            if name not in self.params:
                raise UnknownNameError(
                    "parameter", name, list(self.params) or ["(none)"], f"backend {self.name!r}"
                )
            self.params[name].check(value, self.name)
        bound = self.bind(**{**self.defaults(), **values})
        return dataclasses.replace(bound, params=self.params, bind=self.bind)


@dataclasses.dataclass(frozen=True)
class Scenario:
    """A workload and its interchangeable backends.

    Attributes:
        name: the CLI name.
        description: one line.
        sizes: named sizes; must contain ``smoke`` and ``default``.
        make_inputs: ``make_inputs(size, seed, dtype) -> host pytree`` (NumPy arrays).
        reference: ``reference(inputs) -> expected`` computed independently of backends.
        check: ``check(output, expected, dtype) -> max_error``; raises MismatchError.
        work: ``work(size, dtype) -> {unit: amount}`` per call, e.g. ``systems``, ``bytes``.
        backends: the backends, keyed by name (the CLI choices), in display order.
        throughput_unit: the key of ``work`` that throughput is reported in.
        dtypes: the dtypes this scenario supports; the first is the default.
        describe_output: optional ``describe_output(output) -> dict`` stored with each
            record (e.g. the best fitness per generation and the tuned parameters).
        count_along: optional name of an integer size parameter along which the work
            repeats (MPPI: ``generations``). The counting passes (whose traces grow with
            every event) then run with it at 2, 3 and 4, and each count is extrapolated
            exactly as fixed + per unit x n, the third point checking the line
            (`scanbench.probes.extrapolation`); a count that is not linear gets no number.
        baseline: the backend that reports give speedups against; default: the backend
            named ``sequential``, else the first backend whose strategy is ``sequential``.
        axes: the directions its work grows in, name -> `Axis` (TDMA: ``batch``, ``n``):
            ``scanbench run --grow NAME=START..STOP`` sweeps one, and `size` resolves the
            grown sizes' names (``default@batch=4000``).
    """

    name: str
    description: str
    sizes: Mapping[str, Size]
    make_inputs: Callable[[Size, int, str], Any]
    reference: Callable[[Any], Any]
    check: Callable[[Any, Any, str], float]
    work: Callable[[Size, str], Mapping[str, float]]
    backends: Mapping[str, Backend]
    throughput_unit: str
    dtypes: tuple[str, ...] = ("float64", "float32")
    describe_output: Callable[[Any], Mapping[str, Any]] | None = None
    count_along: str | None = None
    baseline: str | None = None
    axes: Mapping[str, Axis] = dataclasses.field(default_factory=dict)
    _grown: dict[str, Size] = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False
    )  # the grown sizes resolved so far: one object per name, as for the named sizes

    def __post_init__(self) -> None:
        self._check_axes()
        for required in ("smoke", "default"):
            if required not in self.sizes:
                raise InputError(f"scenario {self.name!r} must define a {required!r} size")
        for key, backend in self.backends.items():
            if key != backend.name:
                raise InputError(f"backend registered as {key!r} is named {backend.name!r}")
        if self.baseline is not None and self.baseline not in self.backends:
            raise UnknownNameError("baseline", self.baseline, list(self.backends), self.name)
        if self.count_along is not None:
            for size in self.sizes.values():
                value = size.params.get(self.count_along)
                if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                    raise InputError(
                        f"scenario {self.name!r}: count_along={self.count_along!r} must name "
                        f"an integer size parameter >= 1; size {size.name!r} has {value!r}"
                    )
        unknown = set(self.dtypes) - set(DTYPES)
        if unknown:
            raise UnknownNameError("dtype", sorted(unknown)[0], DTYPES, self.name)

    @property
    def baseline_backend(self) -> str | None:
        """The name of the backend speedups are reported against (None if there is none)."""
        if self.baseline is not None:
            return self.baseline
        if "sequential" in self.backends:
            return "sequential"
        sequential = [b.name for b in self.backends.values() if b.strategy == "sequential"]
        return sequential[0] if sequential else None

    def _check_axes(self) -> None:
        for name, axis in self.axes.items():
            if not isinstance(axis, Axis):
                raise InputError(f"scenario {self.name!r}: axes[{name!r}] must be an Axis")
            if not name.isidentifier():
                raise InputError(f"scenario {self.name!r}: axis name {name!r} must be a word")
            for size in self.sizes.values():
                value = size.params.get(axis.param)
                if not isinstance(value, int) or isinstance(value, bool) or value < axis.minimum:
                    raise InputError(
                        f"scenario {self.name!r}: axis {name!r} must name an integer size "
                        f"parameter >= {axis.minimum}; size {size.name!r} has "
                        f"{axis.param}={value!r}"
                    )

    def axis(self, name: str) -> Axis:
        if name not in self.axes:
            raise UnknownNameError(
                "axis", name, list(self.axes) or ["(none declared)"], f"scenario {self.name!r}"
            )
        return self.axes[name]

    def size(self, name: str) -> Size:
        """A named size, or a grown one (``BASE@AXIS=VALUE``, see `Axis`)."""
        if name in self.sizes:
            return self.sizes[name]
        grown = grown_parts(name)
        if grown is None:
            raise UnknownNameError("size", name, list(self.sizes), f"scenario {self.name!r}")
        if name not in self._grown:
            base_name, axis_name, value = grown
            base, axis = self.size(base_name), self.axis(axis_name)
            params = axis.params(base, value)
            description = f"{base.name} with {axis_name} = {value}"
            self._grown[name] = Size(name, params, description)
        return self._grown[name]

    def backend(self, name: str) -> Backend:
        if name not in self.backends:
            raise UnknownNameError("backend", name, list(self.backends), f"scenario {self.name!r}")
        return self.backends[name]


def _plain(value: Any) -> Any:
    """Mappings (read-only proxies included) and tuples as JSON-ready dicts and lists."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


class Status(enum.StrEnum):
    """What became of a cell."""

    OK = "ok"  # checked against the reference and measured
    FAILED = "failed"  # an error, a mismatch, a crash or a timeout: stored with its message
    SKIPPED = "skipped"  # the backend does not run at this size (stored with the reason)


STATUSES = tuple(Status)


@dataclasses.dataclass(frozen=True)
class Record:
    """The stored result of one cell (scenario x backend x size x dtype)."""

    scenario: str
    backend: str
    strategy: str
    engine: str
    size: str
    dtype: str
    seed: int
    status: Status
    error: str | None = None
    device: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    size_params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    work: Mapping[str, float] = dataclasses.field(default_factory=dict)
    prepare_s: float | None = None
    first_call_s: float | None = None
    samples_s: tuple[float, ...] = ()
    stats: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    max_error: float | None = None
    x64: bool | None = None
    wall_s: float | None = None
    counts: Counts = dataclasses.field(default_factory=Counts)
    decomposition: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    interference: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    devices: int | None = None  # the cell's requested device count (--devices), if any
    sampling: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # how it was timed
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # --param values
    checked: bool = True  # False: timed without comparing its output (Backend.checked)
    parallel: bool = False  # the backend uses every core (Backend.parallel)
    cache: str = WARM  # "cold": the caches were evicted before every sample (--cache)
    xla_flags: tuple[str, ...] = ()  # the XLA flags the backend declares (Backend.xla_flags)
    xla_flags_applied: bool = True  # False: measured in a process that started without them
    chains: str | None = None  # how it runs dependent chains (Backend.chains), if declared

    @property
    def key(self) -> tuple:
        """What identifies the cell this record measured (to resume a run)."""
        key = (self.scenario, self.backend, self.size, self.dtype, self.seed, self.devices)
        key = (*key, tuple(sorted(self.params.items()))) if self.params else key
        return key if self.cache == WARM else (*key, self.cache)

    @property
    def disturbed(self) -> bool:
        """The machine was busy while this cell ran, or its samples had a slow spell (see
        `scanbench.execution.interference`, `scanbench.spells`)."""
        return bool(self.interference.get("disturbed"))

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise UnknownNameError("status", self.status, STATUSES)
        object.__setattr__(self, "status", Status(self.status))
        if not isinstance(self.counts, Counts):
            object.__setattr__(self, "counts", Counts.from_json(self.counts))

    def to_json(self) -> dict[str, Any]:
        out = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        out = {key: _plain(value) for key, value in out.items()}
        out["status"] = str(self.status)
        out["counts"] = self.counts.to_json()
        out["samples_s"] = list(self.samples_s)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Record:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise StoreError(f"record has unknown fields: {', '.join(sorted(unknown))}")
        missing = {"scenario", "backend", "strategy", "engine", "size", "dtype", "seed", "status"}
        missing -= set(data)
        if missing:
            raise StoreError(f"record lacks fields: {', '.join(sorted(missing))}")
        fields = dict(data)
        fields["samples_s"] = tuple(fields.get("samples_s", ()))
        fields["xla_flags"] = tuple(fields.get("xla_flags", ()))
        return cls(**fields)

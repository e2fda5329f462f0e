"""What to run: cells (scenario x backend x size x dtype x seed x devices) and their
selection from what the user named, checked against the scenarios before anything runs.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from .api import (
    CACHE_MODES,
    WARM,
    HarnessError,
    InputError,
    Scenario,
    UnknownNameError,
    cache_suffix,
    param_suffix,
)
from .sampling import TimingConfig
from .sources import catalogue, load, resolve


@dataclasses.dataclass(frozen=True)
class Cell:
    """One unit of measurement: scenario x backend x size x dtype (x seed, x devices).

    ``source`` says where the scenario lives (`scanbench.sources`); its worker loads exactly
    that. ``scenario`` is the scenario's name, as stored in the record."""

    scenario: str
    backend: str
    size: str
    dtype: str
    seed: int = 0
    source: str = ""
    devices: int | None = None  # None: the worker's devices as they are (scanbench.sharding)
    params: tuple[tuple[str, Any], ...] = ()  # the backend's parameters (--param), sorted
    cache: str = WARM  # "cold": the caches evicted before every sample (--cache)

    def __post_init__(self) -> None:  # a bundled scenario may be named without its source
        if self.cache not in CACHE_MODES:
            raise UnknownNameError("--cache mode", self.cache, CACHE_MODES)
        object.__setattr__(self, "source", resolve(self.source or self.scenario))
        pairs = dict(self.params.items() if isinstance(self.params, Mapping) else self.params)
        object.__setattr__(self, "params", tuple(sorted(pairs.items())))

    @property
    def key(self) -> tuple:
        """Matches `Record.key` of the record that measured this cell."""
        key = (self.scenario, self.backend, self.size, self.dtype, self.seed, self.devices)
        key = (*key, self.params) if self.params else key
        return key if self.cache == WARM else (*key, self.cache)

    @property
    def label(self) -> str:
        backend = self.backend + param_suffix(dict(self.params)) + cache_suffix(self.cache)
        label = f"{self.scenario}/{backend}/{self.size}/{self.dtype}"
        return label if self.devices is None else f"{label}/{self.devices}dev"


def scenario_of(cell: Cell) -> Scenario:
    """The scenario a cell names, loaded from its source (once per process)."""
    scenario = load(cell.source)
    if scenario.name != cell.scenario:
        raise InputError(
            f"scenario source {cell.source!r} defines scenario {scenario.name!r}, "
            f"not {cell.scenario!r}"
        )
    return scenario


def _sweeps(backend, wanted: Mapping[str, Sequence[str]]) -> list[dict[str, Any]]:
    """One parameter set per combination of the values ``wanted`` names that the backend
    declares (``[{}]``: the backend at its defaults)."""
    mine = {name: values for name, values in wanted.items() if name in backend.params}
    parsed = {
        name: [backend.params[name].parse(value, name, backend.name) for value in values]
        for name, values in mine.items()
    }
    names = list(parsed)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*parsed.values())]


def cell(scenario: str, backend: str, size: str, dtype: str | None = None, seed: int = 0) -> Cell:
    """One cell, every name checked (``scenario``: a catalogue name or a source)."""
    (only,) = select([scenario], [backend], size, dtype, seed)
    return only


def select(
    scenarios: Sequence[str] = (),
    backends: Sequence[str] = (),
    size: str = "default",
    dtype: str | None = None,
    seed: int = 0,
    params: Mapping[str, Sequence[str]] | None = None,
) -> list[Cell]:
    """The cells to run, validating every name against the scenarios.

    Args:
        scenarios: catalogue names or sources (``module:ATTR``, ``path.py:ATTR``); empty
            means every scenario of the catalogue.
        backends: backend names; empty means every backend of each scenario. Each name
            must exist in every selected scenario.
        size: a size name every selected scenario defines.
        dtype: ``None`` for each scenario's default dtype.
        params: ``{name: [value, ...]}`` (``--param``): each selected backend that declares
            a name runs once per value (per combination, for several names); the others
            run at their defaults. A name no selected backend declares is an error.
    """
    if seed < 0:
        raise InputError(f"--seed must be >= 0, got {seed}")
    sources = [resolve(name) for name in (scenarios or list(catalogue()))]
    loaded = [(source, load(source)) for source in dict.fromkeys(sources)]
    if len({scenario.name for _, scenario in loaded}) != len(loaded):
        raise InputError("a scenario was selected twice")
    cells = []
    for source, scenario in loaded:
        scenario.size(size)
        chosen_dtype = dtype or scenario.dtypes[0]
        if chosen_dtype not in scenario.dtypes:
            raise UnknownNameError(
                "dtype", chosen_dtype, scenario.dtypes, f"scenario {scenario.name!r}"
            )
        names = list(backends) or list(scenario.backends)
        for backend in names:
            scenario.backend(backend)
        for name in dict.fromkeys(names):
            backend = scenario.backend(name)
            for values in _sweeps(backend, params or {}):
                cells.append(
                    Cell(scenario.name, name, size, chosen_dtype, seed, source, None, values)
                )
    if not cells:
        raise HarnessError("nothing selected to run")
    declared = {
        param
        for _, scenario in loaded
        for name in (backends or scenario.backends)
        for param in scenario.backend(name).params
    }
    for name in params or {}:
        if name not in declared:
            raise UnknownNameError(
                "--param", name, sorted(declared) or ["(none)"], "the selected backends"
            )
    return cells


@dataclasses.dataclass(frozen=True)
class Selection:
    """The cells a user names (``scanbench run``'s options), before they are checked:
    every size x selected backend (x ``--param`` value) x device count x cache mode.

    Attributes:
        scenarios: catalogue names or sources; empty: every scenario of the catalogue.
        backends: backend names; empty: every backend of each scenario.
        sizes: size names every selected scenario defines.
        dtype: ``None`` for each scenario's default dtype.
        seed: the input seed.
        devices: device counts (``None``: the worker's devices as they are).
        params: ``{name: [value, ...]}`` (``--param``, see `select`).
        caches: cache modes (``--cache``).
    """

    scenarios: tuple[str, ...] = ()
    backends: tuple[str, ...] = ()
    sizes: tuple[str, ...] = ("default",)
    dtype: str | None = None
    seed: int = 0
    devices: tuple[int | None, ...] = (None,)
    params: Mapping[str, Sequence[str]] = dataclasses.field(default_factory=dict)
    caches: tuple[str, ...] = (WARM,)


def cells_of(selection: Selection) -> list[Cell]:
    """The cells a selection names, size by size, every name checked."""
    return [
        dataclasses.replace(cell, devices=count, cache=cache)
        for size in selection.sizes
        for cell in select(
            selection.scenarios,
            selection.backends,
            size,
            selection.dtype,
            selection.seed,
            selection.params,
        )
        for count in selection.devices
        for cache in selection.caches
    ]


def cell_spec(
    cell: Cell,
    timing: TimingConfig,
    probes: bool = True,
    counts_only: bool = False,
    count_parts: bool = False,
    resample: int = 0,
) -> dict[str, Any]:
    """What a cell's worker is told (`scanbench.execution.worker` ``cell`` mode), as JSON:
    ``resample``, how many times samples with a slow spell are taken again in it."""
    return {
        "cell": dataclasses.asdict(cell),
        "timing": dataclasses.asdict(timing),
        "probes": probes,
        "counts_only": counts_only,
        "count_parts": count_parts,
        "resample": resample,
    }

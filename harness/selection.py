"""What to run: cells (scenario x backend x size x dtype x seed x devices) and their
selection from what the user named, checked against the scenarios before anything runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from harness.api import HarnessError, InputError, Scenario, UnknownNameError
from harness.sources import catalogue, load, resolve


@dataclasses.dataclass(frozen=True)
class Cell:
    """One unit of measurement: scenario x backend x size x dtype (x seed, x devices).

    ``source`` says where the scenario lives (`harness.sources`); its worker loads exactly
    that. ``scenario`` is the scenario's name, as stored in the record."""

    scenario: str
    backend: str
    size: str
    dtype: str
    seed: int = 0
    source: str = ""
    devices: int | None = None  # None: the worker's devices as they are (harness.sharding)

    def __post_init__(self) -> None:  # a bundled scenario may be named without its source
        object.__setattr__(self, "source", resolve(self.source or self.scenario))

    @property
    def key(self) -> tuple:
        """Matches `Record.key` of the record that measured this cell."""
        return (self.scenario, self.backend, self.size, self.dtype, self.seed, self.devices)

    @property
    def label(self) -> str:
        label = f"{self.scenario}/{self.backend}/{self.size}/{self.dtype}"
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
) -> list[Cell]:
    """The cells to run, validating every name against the scenarios.

    Args:
        scenarios: catalogue names or sources (``module:ATTR``, ``path.py:ATTR``); empty
            means every scenario of the catalogue.
        backends: backend names; empty means every backend of each scenario. Each name
            must exist in every selected scenario.
        size: a size name every selected scenario defines.
        dtype: ``None`` for each scenario's default dtype.
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
        for backend in dict.fromkeys(names):
            cells.append(Cell(scenario.name, backend, size, chosen_dtype, seed, source))
    if not cells:
        raise HarnessError("nothing selected to run")
    return cells

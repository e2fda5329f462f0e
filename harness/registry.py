"""The registered scenarios and the selection of cells to run.

Scenarios are listed explicitly in ``SCENARIOS`` (no discovery). A user's own scenario
comes from a Python file that defines ``SCENARIO``, passed as ``--scenario-file``.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from harness.api import HarnessError, InputError, Scenario, UnknownNameError


def _tridiagonal() -> Scenario:
    from scenarios.tridiagonal import SCENARIO

    return SCENARIO


def _mppi() -> Scenario:
    from scenarios.mppi_tuning import SCENARIO

    return SCENARIO


def _mppi_cartpole() -> Scenario:
    from scenarios.mppi_tuning import CARTPOLE_SCENARIO

    return CARTPOLE_SCENARIO


# name -> loader; loaders import lazily so `scanbench list` of one scenario stays cheap.
SCENARIOS: Mapping[str, Callable[[], Scenario]] = {
    "tridiagonal": _tridiagonal,
    "mppi_tuning": _mppi,
    "mppi_tuning_cartpole": _mppi_cartpole,
}


def _where_in(source: Path, error: BaseException, shown: str | Path) -> str:
    """``file:line`` of the deepest frame of ``error``'s traceback inside ``source``."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == str(source)]
    return f"{shown}:{frames[-1].lineno}" if frames else str(shown)


def load_scenario_file(path: str | Path) -> Scenario:
    """Import a user's Python file and return its ``SCENARIO``.

    Raises:
        InputError: the file does not exist, does not import (``file:line: message`` for
            a syntax error, a failed import or an exception at its top level), or defines
            no ``SCENARIO`` of type Scenario.
    """
    source = Path(path).resolve()
    if not source.is_file():
        raise InputError(f"--scenario-file {str(path)!r}: no such file")
    module_name = f"scanbench_user_scenario_{abs(hash(str(source)))}"
    spec = importlib.util.spec_from_file_location(module_name, source)
    if spec is None or spec.loader is None:
        raise InputError(f"--scenario-file {str(path)!r}: cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as error:
        sys.modules.pop(module_name, None)
        raise InputError(f"{path}:{error.lineno}: syntax error: {error.msg}") from None
    except Exception as error:
        sys.modules.pop(module_name, None)
        raise InputError(
            f"{_where_in(source, error, path)}: {type(error).__name__}: {error}"
        ) from None
    scenario = getattr(module, "SCENARIO", None)
    if not isinstance(scenario, Scenario):
        raise InputError(
            f"--scenario-file {str(path)!r} must define SCENARIO = harness.api.Scenario(...)"
        )
    return scenario


def get_scenario(name: str, scenario_file: str | None = None) -> Scenario:
    """A registered scenario by name, or the one defined in ``scenario_file``."""
    if scenario_file is not None:
        scenario = load_scenario_file(scenario_file)
        if name not in (None, scenario.name):
            raise UnknownNameError("scenario", name, [scenario.name], scenario_file)
        return scenario
    if name not in SCENARIOS:
        raise UnknownNameError("scenario", name, list(SCENARIOS))
    return SCENARIOS[name]()


@dataclasses.dataclass(frozen=True)
class Cell:
    """One unit of measurement: scenario x backend x size x dtype (x seed)."""

    scenario: str
    backend: str
    size: str
    dtype: str
    seed: int = 0
    scenario_file: str | None = None
    devices: int | None = None  # None: the worker's devices as they are (see harness.sharding)

    @property
    def key(self) -> tuple:
        """Matches `Record.key` of the record that measured this cell."""
        return (self.scenario, self.backend, self.size, self.dtype, self.seed, self.devices)

    @property
    def label(self) -> str:
        label = f"{self.scenario}/{self.backend}/{self.size}/{self.dtype}"
        return label if self.devices is None else f"{label}/{self.devices}dev"


def select(
    scenarios: Sequence[str] = (),
    backends: Sequence[str] = (),
    size: str = "default",
    dtype: str | None = None,
    seed: int = 0,
    scenario_file: str | None = None,
) -> list[Cell]:
    """The cells to run, validating every name against what is registered.

    Args:
        scenarios: scenario names; empty means every registered scenario (or the one in
            ``scenario_file``).
        backends: backend names; empty means every backend of each scenario. Each name
            must exist in every selected scenario.
        size: a size name every selected scenario defines.
        dtype: ``None`` for each scenario's default dtype.
    """
    if seed < 0:
        raise InputError(f"--seed must be >= 0, got {seed}")
    if scenario_file is not None:
        loaded = [load_scenario_file(scenario_file)]
        for name in scenarios:
            if name != loaded[0].name:
                raise UnknownNameError("scenario", name, [loaded[0].name], scenario_file)
    else:
        loaded = [get_scenario(name) for name in (scenarios or list(SCENARIOS))]
    if len({scenario.name for scenario in loaded}) != len(loaded):
        raise InputError("a scenario was selected twice")
    cells = []
    for scenario in loaded:
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
            cells.append(Cell(scenario.name, backend, size, chosen_dtype, seed, scenario_file))
    if not cells:
        raise HarnessError("nothing selected to run")
    return cells

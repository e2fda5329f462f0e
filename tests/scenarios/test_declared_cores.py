"""Every bundled backend declares the cores it uses, checked against the cores measured.

A backend's ``parallel`` declaration is what results without measured cores fall back on
(the memory bound of every core, the faster neighbour's pool): a Numba ``prange`` kernel
declared single-core made numba the "like-with-like" neighbour of single-core backends.
The committed smoke run (and the QD scenarios' default run) measured every cell's cores
(`scanbench.probes.usage`): a host backend (Numba, NumPy, SciPy) declared single-core
that ran on 1.5 cores or more, or one declared parallel that ran on fewer than 1.2 on a
quiet machine, fails here; a sharded
backend is parallel by its strategy. JAX backends are not held to it: XLA's own thread
pool decides how many cores a single-device program uses.
"""

from __future__ import annotations

import dataclasses

import pytest

from scanbench.results import load_run
from scanbench.scenarios import CATALOGUE
from scanbench.sources import load
from tests.support.paths import REPO_ROOT

# the committed runs with measured cores: the smoke run, and the QD scenarios' own
RESULTS = (
    REPO_ROOT / "docs" / "results" / "smoke.json",
    REPO_ROOT / "docs" / "results" / "qd" / "default.json",
)
HOST_ENGINES = ("numba", "numpy", "scipy")
MANY = 1.5  # a single-core backend never measures this many cores, busy machine or not
FEW = 1.2  # a parallel backend on a quiet 2-core machine measures more than this


def _measured() -> dict[tuple[str, str], tuple[float, bool]]:
    found = {}
    records = [record for path in RESULTS for record in load_run(path).records]
    for record in records:
        usage = dict(record.sampling or {}).get("usage") or {}
        if record.status == "ok" and usage.get("cores") is not None:
            found[(record.scenario, record.backend)] = (
                float(usage["cores"]),
                bool(usage.get("contended")),
            )
    return found


MEASURED = _measured()
BUNDLED = [
    (name, backend)
    for name, source in CATALOGUE.items()
    for backend in load(source).backends.values()
]


def _declaration_error(scenario: str, backend, cores: float, contended: bool) -> str | None:
    """Why ``backend``'s declaration disagrees with the ``cores`` it was measured on."""
    if not backend.parallel and cores >= MANY:
        return (
            f"{scenario}/{backend.name} ran on {cores:.2f} cores but declares one: "
            "declare parallel=True"
        )
    if backend.parallel and not contended and cores <= FEW:
        return f"{scenario}/{backend.name} declares every core but ran on {cores:.2f}"
    return None


@pytest.mark.parametrize(
    ("scenario", "backend"), BUNDLED, ids=[f"{s}-{b.name}" for s, b in BUNDLED]
)
def test_a_bundled_backend_declares_the_cores_it_was_measured_on(scenario, backend) -> None:
    if backend.strategy == "sharded":
        pytest.skip("parallel by its strategy (scanbench.findings.cores_of)")
    if backend.engine not in HOST_ENGINES:
        pytest.skip("XLA's thread pool decides a JAX program's cores")
    measured = MEASURED.get((scenario, backend.name))
    if measured is None:
        pytest.skip("not in the committed runs")
    assert _declaration_error(scenario, backend, *measured) is None


def test_the_check_fails_on_a_prange_backend_declared_single_core() -> None:
    """Every Numba prange cell measured on many cores in the committed runs, declared
    single-core instead, fails the rule above (the test can fail)."""
    planted = [
        (scenario, dataclasses.replace(backend, parallel=False), *MEASURED[key])
        for scenario, backend in BUNDLED
        if backend.engine == "numba"
        and (key := (scenario, backend.name)) in MEASURED
        and MEASURED[key][0] >= MANY
    ]
    assert planted, "no Numba cell on many cores in the committed runs"
    for scenario, backend, cores, contended in planted:
        assert "declare parallel=True" in _declaration_error(scenario, backend, cores, contended)

"""Quality-diversity tuning of MPPI: CMA-ME over (log lambda, log sigma, noise mean).

The public MPPI library's QD tuner (``autotune_qd.py``: pyribs' GridArchive,
EvolutionStrategyEmitter and Scheduler) evaluates its population one solution at a time.
Two scenarios share this package: ``qd_tuning`` (pendulum swing-up) and
``qd_tuning_cartpole``, over ``mppi_tuning``'s controller and systems. Backends, in
display order, are listed in ``backends()``; the dict keys are the CLI names. The
pyribs-driven backends are skipped, with the reason, where pyribs is not installed.
"""

from __future__ import annotations

from scanbench import Backend, Scenario
from scanbench.extras import needing

from .cma_me_scan import scanned_backend
from .problem import AXES, make_inputs, sizes, work
from .reference64 import check, describe, reference
from .ribs_loops import library_backend, numba_backend, sequential_backend
from .roofline import roofline_backend
from .sharded import sharded_backend

# what each backend imports beyond the core install: without it (`pip install
# 'scanbench[mppi]'`, `scanbench[numba]`) its cells are stored as skipped, saying so;
# a backend not listed runs evosax's CMA-ES emitters
EVOSAX = ("the evosax CMA-ME backends", "evosax")
NEEDS = {
    "sequential": ("the pyribs backends", "ribs"),
    "library": ("the pyribs backends", "ribs"),
    "numba": ("the pyribs backends with Numba evaluation", "ribs", "numba"),
}


def backends() -> list[Backend]:
    return [needing(backend, *NEEDS.get(backend.name, EVOSAX)) for backend in _backends()]


def _backends() -> list[Backend]:
    return [
        sequential_backend(
            "sequential",
            description="the tuner's loop: pyribs ask/tell, one jitted call and one host "
            "conversion per solution",
            reducible_to=2,  # `large`: 10,800 calls per run; timed on 2 generations, scaled
        ),
        library_backend(
            "library", description="pyribs ask/tell, the population in one jitted call"
        ),
        scanned_backend(
            "scanned",
            description="CMA-ME in one lax.scan: evosax emitters (vmapped), array archive",
        ),
        sharded_backend(
            "sharded", description="scanned, the population's evaluation split over devices"
        ),
        numba_backend(
            "numba",
            description="pyribs ask/tell, the population evaluated by a float32 Numba kernel "
            "(the K samples as lanes, prange over solutions)",
        ),
        roofline_backend("roofline"),
    ]


def make_scenario(name: str, system: str, description: str) -> Scenario:
    return Scenario(
        name=name,
        description=description,
        sizes=sizes(system),
        make_inputs=make_inputs,
        reference=reference,
        check=check,
        work=work,
        backends={backend.name: backend for backend in backends()},
        throughput_unit="evaluations",
        dtypes=("float32",),
        describe_output=describe,
        count_along="generations",
        axes=AXES,
    )


SCENARIO = make_scenario(
    "qd_tuning", "pendulum", "CMA-ME (quality diversity) tuning of MPPI: pendulum swing-up"
)
CARTPOLE_SCENARIO = make_scenario(
    "qd_tuning_cartpole", "cartpole", "CMA-ME (quality diversity) tuning of MPPI: cart-pole"
)

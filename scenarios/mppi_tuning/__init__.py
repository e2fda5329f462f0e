"""MPPI autotuning: CMA-ES over (lambda, sigma) of a pure MPPI controller.

Two scenarios share this package: ``mppi_tuning`` (damped pendulum swing-up) and
``mppi_tuning_cartpole`` (cart-pole swing-up). Backends, in display order, are listed
explicitly in ``backends()``; the dict keys are the CLI names. The JAX backends declare
the XLA:CPU flags that make them fastest for their system (`compiler_flags`);
``scanned-xla-default`` is ``scanned`` without them, so the gain is measured in every run.
"""

from __future__ import annotations

import dataclasses

from scanbench import Backend, Scenario
from scanbench.extras import needing

from .cma_loops import library_backend, numba_backend, numba_scalar_backend
from .compiler_flags import DEFAULT_FLAGS, flags_for
from .jax_loops import scanned_backend, sequential_backend, vmapped_backend
from .problem import AXES, check, make_inputs, reference, sizes, work
from .roofline import roofline_backend
from .sharded import sharded_backend
from .tuning import describe

# what each backend imports beyond the core install: without it (`pip install
# 'scanbench[mppi]'`, `scanbench[numba]`) its cells are stored as skipped, saying so;
# a backend not listed tunes with evosax's CMA-ES
EVOSAX = ("the evosax CMA-ES backends", "evosax")
NEEDS = {
    "library": ("the cma CMA-ES backends", "cma"),
    "numba": ("the Numba backends with cma's CMA-ES", "cma", "numba"),
    "numba-scalar": ("the Numba backends with cma's CMA-ES", "cma", "numba"),
    "roofline": ("the Numba roofline backends", "numba"),
}


def _declaring(flags: tuple[str, ...], backend: Backend) -> Backend:
    """``backend`` with its worker started with these XLA flags."""
    return dataclasses.replace(backend, xla_flags=flags)


def backends(system: str) -> list[Backend]:
    return [needing(backend, *NEEDS.get(backend.name, EVOSAX)) for backend in _backends(system)]


def _backends(system: str) -> list[Backend]:
    jax_backends = [
        sequential_backend(
            "sequential-eager",
            jit_controller=False,
            description="Python loop over candidates, controller called eagerly (recompiles)",
            sizes=frozenset({"smoke"}),
            skip_reason="the eager controller retraces and recompiles its scan on every call",
            reducible_to=1,  # seconds per generation: one generation, scaled (openly)
        ),
        sequential_backend(
            "sequential",
            jit_controller=True,
            description="the real-world loop: np.array(x) -> holder, 1 jitted call per step",
            reducible_to=2,  # at `default`, whole calls do not fit the time budget
        ),
        vmapped_backend(
            "vmapped", description="ask/tell in Python, one jitted vmapped evaluate per gen"
        ),
        scanned_backend("scanned", description="the whole ask-evaluate-tell loop in lax.scan"),
        sharded_backend(
            "sharded", description="scanned, population split over all devices (shard_map)"
        ),
        library_backend("library", description="cma CMA-ES + the vmapped JAX evaluation"),
    ]
    flags = flags_for(system)
    return [
        *(_declaring(flags, backend) for backend in jax_backends[:-1]),
        _declaring(
            DEFAULT_FLAGS,
            scanned_backend(
                "scanned-xla-default",
                description="scanned with XLA:CPU's default options (no declared flags)",
            ),
        ),
        numba_backend(
            "numba",
            description="cma CMA-ES + float32 Numba evaluation, the K samples as "
            "vectorised lanes (prange over candidates)",
        ),
        numba_scalar_backend(
            "numba-scalar",
            description="cma CMA-ES + float64 Numba evaluation, one sample at a time",
            reducible_to=2,
        ),
        _declaring(flags, jax_backends[-1]),
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
        backends={backend.name: backend for backend in backends(system)},
        throughput_unit="candidate_evaluations",
        dtypes=("float32",),
        describe_output=describe,
        count_along="generations",
        axes=AXES,
    )


SCENARIO = make_scenario(
    "mppi_tuning", "pendulum", "CMA-ES tuning of MPPI (lambda, sigma): pendulum swing-up"
)
CARTPOLE_SCENARIO = make_scenario(
    "mppi_tuning_cartpole", "cartpole", "CMA-ES tuning of MPPI (lambda, sigma): cart-pole"
)

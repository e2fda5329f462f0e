"""MPPI tuning as a scenario: sizes, inputs, work units, reference check.

The "inputs" are the static configuration and the seed of the root key: every backend
derives the same generation, ask, tell and episode keys from them (``objective``).
The check re-evaluates, with the reference JAX objective on the same keys, the best
candidate each backend reports for every generation: a backend whose fitness values
disagree with the objective fails, whatever optimizer drove it.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from scanbench import Axis, MismatchError, Size, UnknownNameError, compile_reference

from .controller import Config
from .objective import episode_keys, evaluate, generation_key

# Relative tolerance of a reported fitness against the reference objective. The closed
# loop amplifies rounding: the same candidate evaluated in batches of other shapes (or by
# Numba in float64) differs by up to ~1e-3 (cart-pole, measured), and each generation's
# *best* candidate is selected among P noisy values, so it is the one whose rounding
# happened to favour it most (cart-pole default: up to 1.7e-2 seen). So the typical
# generation (median error) must agree to 5e-3 and the worst one to 5e-2: a backend with
# wrong keys, noise or parameters is off by the evaluation noise (~10%) in most generations.
RTOL = {"float32": 5e-3}
RTOL_WORST = {"float32": 5e-2}
DT = 0.1
# The reference objective is compiled without XLA's backend optimizations: it evaluates G
# candidates once per check, so its run time does not matter, and every MPPI cell's worker
# compiles it anew, several times faster at level 0, to the same fitness values
# (performance log, 2026-11-22). It also keeps the reference apart from the fusions the
# backends are compiled with.
REFERENCE_COMPILER_OPTIONS = {"xla_backend_optimization_level": 0}


def _size(name: str, description: str, **params: Any) -> Size:
    return Size(name, params, description)


def sizes(system: str) -> dict[str, Size]:
    base = {"system": system, "dt": DT}
    return {
        "smoke": _size(
            "smoke",
            "tests and CI",
            # the eager loop recompiles P x S x G times per call: P small, but not 2, whose
            # (2, 2) population has its transpose's shape
            population=3,
            generations=2,
            samples=32,
            horizon=10,
            control_steps=2,  # the eager loop recompiles once per control step
            episodes=1,
            **base,
        ),
        "default": _size(
            "default",
            "nox -s bench",
            population=64,
            generations=4,  # `large` has 20: G, S and E keep `nox -s bench` in minutes
            samples=256,
            horizon=20,
            control_steps=10,  # `large` has 20
            episodes=1,  # `large` has 2
            **base,
        ),
        "large": _size(
            "large",
            "a GPU or a patient CPU",
            population=1024,
            generations=20,
            samples=1024,
            horizon=20,
            control_steps=20,
            episodes=2,
            **base,
        ),
    }


# the directions the work grows in (`scanbench run --grow population=2..64`)
AXES = {
    "population": Axis("population", "candidates", "P: candidates per generation", minimum=2),
    "samples": Axis("samples", "rollouts", "K: sampled control sequences per command"),
    "horizon": Axis("horizon", "steps", "T: steps per sampled sequence"),
    "generations": Axis("generations", "generations", "G: CMA-ES generations per call"),
}


class MppiInputs(NamedTuple):
    config: Config
    seed: int


def make_config(size: Size) -> Config:
    return Config(**dict(size.params))


def make_inputs(size: Size, seed: int, dtype: str) -> MppiInputs:
    if dtype != "float32":
        raise UnknownNameError("dtype", dtype, ["float32"], "the MPPI scenarios")
    return MppiInputs(make_config(size), seed)


def work(size: Size, dtype: str) -> dict[str, float]:
    p = size.params
    evaluations = p["population"] * p["generations"]
    steps = evaluations * p["episodes"] * p["control_steps"] * p["samples"] * p["horizon"]
    return {
        "candidate_evaluations": float(evaluations),
        "dynamics_steps": float(steps),
        "generations": float(p["generations"]),
    }


@dataclasses.dataclass(frozen=True)
class Reference:
    """The reference objective of one candidate in one generation, jitted once and called
    per generation (not vmapped over generations: a PRNG other than threefry, e.g.
    ``JAX_DEFAULT_PRNG_IMPL=rbg``, draws other numbers under vmap than in a loop, and the
    backends walk the generations one at a time)."""

    inputs: MppiInputs

    @functools.cached_property
    def _evaluate(self):
        """Compiled once per reference: a cell checks its first and its last output."""
        config = self.inputs.config
        root = jax.random.key_data(jax.random.key(self.inputs.seed))

        def one(generation, z):
            keys = episode_keys(generation_key(root, generation), config.episodes)
            return evaluate(keys, z, config)

        lowered = jax.jit(one).lower(
            jax.ShapeDtypeStruct((), jnp.int32), jax.ShapeDtypeStruct((2,), jnp.float32)
        )
        return compile_reference(lowered, REFERENCE_COMPILER_OPTIONS)

    def fitness_of(self, candidates: np.ndarray) -> np.ndarray:
        """The fitness of each generation's candidate (G, 2) on that generation's keys."""
        candidates = jnp.asarray(candidates, jnp.float32)
        return np.asarray(
            [
                self._evaluate(jnp.int32(generation), candidates[generation])
                for generation in range(self.inputs.config.generations)
            ],
            np.float64,
        )


def reference(inputs: MppiInputs) -> Reference:
    return Reference(inputs)


def check(output: Any, expected: Reference, dtype: str) -> float:
    """Re-evaluate each generation's reported best candidate; the median relative error
    over generations must be <= RTOL and the largest <= RTOL_WORST (see RTOL). Returns
    the largest."""
    tolerance = RTOL[dtype]
    config = expected.inputs.config
    candidates = np.asarray(output.best_candidate)
    reported = np.asarray(output.best_fitness, np.float64)
    if candidates.shape != (config.generations, 2) or reported.shape != (config.generations,):
        raise MismatchError(
            f"tuning result has shapes {candidates.shape} and {reported.shape}, expected "
            f"({config.generations}, 2) and ({config.generations},)",
            float("inf"),
            tolerance,
        )
    if not (np.all(np.isfinite(reported)) and np.all(np.isfinite(output.final_mean))):
        raise MismatchError("tuning result has non-finite values", float("inf"), tolerance)
    recomputed = expected.fitness_of(candidates)
    error = np.abs(reported - recomputed) / np.maximum(np.abs(recomputed), 1e-6)
    worst = int(np.argmax(error))
    if error[worst] > RTOL_WORST[dtype]:
        raise MismatchError(
            f"generation {worst}: reported best fitness {reported[worst]:.6g}, the reference "
            f"objective gives {recomputed[worst]:.6g} for that candidate",
            float(error[worst]),
            RTOL_WORST[dtype],
        )
    typical = float(np.median(error))
    if typical > tolerance:
        raise MismatchError(
            f"the reported best fitness differs from the reference objective by a median "
            f"{typical:.3g} over {len(error)} generations",
            typical,
            tolerance,
        )
    return float(error.max())

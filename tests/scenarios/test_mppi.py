"""MPPI tuning: evaluators agree, trajectories agree, tuning helps, bad input is refused."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scanbench.api import InputError, Size, UnknownNameError
from scanbench.probes.trace import trace_calls
from scanbench.scenarios.mppi_tuning import numba_lanes, numba_mppi
from scanbench.scenarios.mppi_tuning.cma_loops import tune_with_cma
from scanbench.scenarios.mppi_tuning.controller import (
    LOG_LOWER,
    LOG_UPPER,
    Config,
    check_bounds,
    params_from_candidate,
)
from scanbench.scenarios.mppi_tuning.jax_loops import (
    ConfigHolder,
    _sequential_evaluate,
    _sequential_prepare,
    tune_scanned,
)
from scanbench.scenarios.mppi_tuning.objective import (
    TILE_LANES,
    candidates_per_tile,
    episode_cost,
    episode_keys,
    episode_noise,
    evaluate,
    evaluate_population,
    generation_key,
)
from scanbench.scenarios.mppi_tuning.problem import MppiInputs
from tests.conftest import bundled

SCENARIOS = ["mppi_tuning", "mppi_tuning_cartpole"]
# Candidates spread over the (log lambda, log sigma) box, including outside it (clipped).
POPULATION = np.array(
    [[0.0, 0.0], [-3.0, 1.0], [2.0, -2.0], [-4.0, 1.5], [4.0, 0.5], [1.0, 1.2], [-9.0, 9.0]],
    np.float32,
)


def smoke_inputs(scenario_name: str, episodes: int = 2, seed: int = 0) -> MppiInputs:
    scenario = bundled(scenario_name)
    inputs = scenario.make_inputs(scenario.size("smoke"), seed, "float32")
    return MppiInputs(dataclasses.replace(inputs.config, episodes=episodes), seed)


@pytest.mark.parametrize("scenario_name", SCENARIOS)
def test_the_population_evaluated_in_tiles_is_each_candidates_evaluation(scenario_name):
    """`evaluate_population` (steps outside the candidates, noise drawn once per step,
    candidates in tiles on a CPU, the last tile short) gives `evaluate`'s fitness."""
    inputs = smoke_inputs(scenario_name)
    system = inputs.config.system
    samples = TILE_LANES[system] // (2 * 3)  # 2 episodes: tiles of 3 candidates
    config = dataclasses.replace(inputs.config, samples=samples, population=len(POPULATION))
    assert candidates_per_tile(config, "cpu") == 3 < len(POPULATION)  # 3 + 3 + 1
    assert candidates_per_tile(config, "gpu") == len(POPULATION)
    keys = episode_keys(generation_key(jax.random.key_data(jax.random.key(5)), 1), 2)
    tiled = jax.jit(lambda k, p: evaluate_population(k, p, config))(keys, POPULATION)
    one_by_one = [jax.jit(lambda k, z: evaluate(k, z, config))(keys, z) for z in POPULATION]
    np.testing.assert_allclose(np.asarray(tiled), np.asarray(one_by_one), rtol=1e-5)
    assert np.ptp(np.asarray(tiled)) > 0.05


@pytest.mark.parametrize("scenario_name", SCENARIOS)
def test_sequential_vmapped_and_numba_evaluations_agree(scenario_name):
    """Same candidates and keys: the same fitness (JAX rtol 1e-5; Numba, fed the same
    noise, float64 arithmetic: rtol 1e-3)."""
    inputs = smoke_inputs(scenario_name)
    config = inputs.config
    keys = episode_keys(generation_key(jax.random.key_data(jax.random.key(3)), 0), 2)
    vmapped = np.asarray(
        jax.jit(lambda k, p: evaluate_population(k, p, config))(keys, jnp.asarray(POPULATION))
    )
    prepared = _sequential_prepare(inputs, None, jit_controller=True)
    holder = ConfigHolder()
    sequential = []
    for candidate in POPULATION:
        holder.apply(candidate)
        sequential.append(_sequential_evaluate(prepared, holder, keys))
    np.testing.assert_allclose(sequential, vmapped, rtol=1e-5)
    noise, starts = episode_noise(keys, config)
    numba = numba_mppi.evaluate_candidates(config, POPULATION, noise, starts)
    np.testing.assert_allclose(numba, vmapped, rtol=1e-3)
    z = np.clip(POPULATION, LOG_LOWER, LOG_UPPER)
    lanes = numba_lanes.evaluate_population(
        numba_lanes.SYSTEM_CODES[config.system],
        np.exp(z[:, 0]).astype(np.float32),
        np.exp(z[:, 1]).astype(np.float32),
        np.asarray(noise, np.float32),
        np.asarray(starts, np.float32),
        np.float32(config.dynamics.u_max),
    )
    np.testing.assert_allclose(lanes, vmapped, rtol=1e-3)  # float32 both, another order
    assert np.ptp(vmapped) > 0.05  # the candidates really differ


def test_sincos_is_float32_accurate_in_jax_and_numba():
    """The dynamics' sin and cos (straight-line arithmetic XLA and LLVM vectorise) agree
    with float64 libm to 1e-7 on [-200, 200], and JAX's with Numba's to 2 float32 ulps
    (the compilers contract different multiply-adds)."""
    import numba

    from scanbench.scenarios.mppi_tuning.systems import sincos

    x = np.linspace(-200.0, 200.0, 200_001).astype(np.float32)
    sin, cos = (np.asarray(v, np.float64) for v in jax.jit(sincos)(jnp.asarray(x)))
    exact = x.astype(np.float64)
    assert np.abs(sin - np.sin(exact)).max() < 1e-7 and np.abs(cos - np.cos(exact)).max() < 1e-7

    @numba.njit
    def lanes_sincos(values):
        out = np.empty((2, values.size), np.float32)
        for i in range(values.size):
            out[0, i], out[1, i] = numba_lanes._sincos(values[i])
        return out

    np.testing.assert_allclose(lanes_sincos(x), np.stack([sin, cos]), rtol=0, atol=2.5e-7)


@pytest.mark.parametrize("scenario_name", SCENARIOS)
def test_the_roofline_does_the_scenarios_work_and_checks_its_arithmetic(scenario_name):
    """The roofline kernel runs P x G x E x S batches of K rollouts (the scenario's
    dynamics steps), each equal to the JAX rollouts; a wrong one fails its check."""
    from scanbench.api import MismatchError
    from scanbench.checks import check_of

    scenario = bundled(scenario_name)
    size = scenario.size("smoke")
    roofline = scenario.backend("roofline")
    prepared = roofline.prepare(scenario.make_inputs(size, 0, "float32"), size)
    costs = roofline.run(prepared)
    p = size.params
    batches = p["population"] * p["generations"] * p["episodes"] * p["control_steps"]
    assert costs.size * p["horizon"] == scenario.work(size, "float32")["dynamics_steps"]
    assert costs.shape == (batches, p["samples"])
    check = check_of(scenario, roofline, prepared)
    assert check(costs, None, "float32") < 1e-3
    with pytest.raises(MismatchError, match="roofline rollouts differ"):
        check(costs * 1.01, None, "float32")


@pytest.mark.parametrize("scenario_name", SCENARIOS)
def test_the_rooflines_check_compiles_once_per_process(scenario_name):
    """The roofline is checked twice per cell (first call, last timed output), the second
    time in the quiet stage: its JAX rollouts compile on the first check only (eagerly,
    each of its 4 batches compiled a scan on every check)."""
    from scanbench.checks import check_of
    from scanbench.probes.compilations import count_compilations

    scenario = bundled(scenario_name)
    size = scenario.size("smoke")
    roofline = scenario.backend("roofline")
    prepared = roofline.prepare(scenario.make_inputs(size, 0, "float32"), size)
    costs = roofline.run(prepared)
    check = check_of(scenario, roofline, prepared)
    check(costs, None, "float32")
    again = count_compilations(lambda: check(costs, None, "float32"))
    assert (again.traces, again.compiles) == (0, 0), again.by_function


def test_evosax_backends_follow_the_same_trajectory():
    scenario = bundled("mppi_tuning")
    size = scenario.size("smoke")
    inputs = scenario.make_inputs(size, 0, "float32")
    results = {}
    for name in ("sequential", "vmapped", "scanned"):
        backend = scenario.backend(name)
        results[name] = jax.block_until_ready(backend.run(backend.prepare(inputs, size)))
    reference = results.pop("scanned")
    for name, result in results.items():
        for field in ("best_candidate", "best_fitness", "final_mean"):
            np.testing.assert_allclose(
                np.asarray(getattr(result, field)),
                np.asarray(getattr(reference, field)),
                rtol=1e-5,
                atol=1e-6,
                err_msg=f"{name}.{field}",
            )


@functools.cache
def held_out_evaluator(scenario_name: str):
    """Per-episode cost of a candidate z on 64 held-out episodes (never used in tuning)."""
    scenario = bundled(scenario_name)
    config = scenario.make_inputs(tuning_size(scenario), 0, "float32").config
    keys = jax.random.split(jax.random.key_data(jax.random.key(2**20)), 64)

    def costs(z):
        params = params_from_candidate(z)
        return jax.vmap(lambda k: episode_cost(k, params, config))(keys)

    return jax.jit(costs)


def held_out_costs(scenario_name: str, z) -> np.ndarray:
    evaluator = held_out_evaluator(scenario_name)
    return np.asarray(evaluator(jnp.asarray(z, jnp.float32)), np.float64)


def assert_improves(scenario_name: str, tuned_means: list[np.ndarray]) -> None:
    """Over the seeds, the tuned parameters (final CMA-ES mean) beat the initial ones
    (lambda = sigma = 1) on held-out episodes by more than 2 standard errors of the
    paired per-episode difference."""
    initial = held_out_costs(scenario_name, (0.0, 0.0))
    differences = [
        initial - held_out_costs(scenario_name, np.asarray(mean)) for mean in tuned_means
    ]
    improvement = np.mean(differences, axis=0)  # per held-out episode, averaged over seeds
    standard_error = improvement.std(ddof=1) / np.sqrt(improvement.size)
    assert improvement.mean() > 2 * standard_error, (improvement.mean(), standard_error)


SEEDS = (0, 1, 2)


def tuning_size(scenario) -> Size:
    """Smoke, with a population and episodes long enough that two generations of CMA-ES
    improve the objective measurably (smoke itself is sized for the time budget)."""
    smoke = scenario.size("smoke")
    return Size("tuning", {**smoke.params, "population": 8, "control_steps": 5})


@pytest.mark.parametrize("scenario_name", SCENARIOS)
def test_evosax_tuning_improves_on_held_out_episodes(scenario_name):
    """The evosax loop (sequential, sequential-eager, vmapped and scanned follow the same
    trajectory: see the trajectory and reference tests) improves the objective at smoke
    size, averaged over seeds 0, 1, 2."""
    scenario = bundled(scenario_name)
    config = scenario.make_inputs(tuning_size(scenario), 0, "float32").config
    tune = jax.jit(lambda root: tune_scanned(root, config))
    means = [tune(jax.random.key_data(jax.random.key(seed))).final_mean for seed in SEEDS]
    assert_improves(scenario_name, means)


@pytest.mark.parametrize("scenario_name", SCENARIOS)
def test_cma_tuning_improves_and_numba_follows_the_same_trajectory(scenario_name):
    """The cma loop (library: JAX evaluation; numba: Numba evaluation of the same
    objective) improves the objective at smoke size averaged over seeds 0, 1, 2. With
    G = 2 one unlucky first generation can go the wrong way (cma with seed 0 samples only
    sigma < 1 at first on the pendulum); the average over seeds must still improve."""
    scenario = bundled(scenario_name)
    size = tuning_size(scenario)
    library = scenario.backend("library")
    prepared = library.prepare(scenario.make_inputs(size, 0, "float32"), size)
    config = prepared["inputs"].config
    results = [tune_with_cma(config, seed, prepared["evaluate"]) for seed in SEEDS]
    assert_improves(scenario_name, [result.final_mean for result in results])
    numba = scenario.backend("numba")
    numba_result = numba.run(numba.prepare(scenario.make_inputs(size, 0, "float32"), size))
    np.testing.assert_allclose(numba_result.best_fitness, results[0].best_fitness, rtol=1e-3)
    np.testing.assert_allclose(numba_result.final_mean, results[0].final_mean, atol=1e-4)


def test_sequential_dispatches_grow_linearly_with_population_scanned_is_one():
    scenario = bundled("mppi_tuning")
    size = scenario.size("smoke")
    base = scenario.make_inputs(size, 0, "float32")
    dispatches = {}
    for population in (2, 4, 6):
        config = dataclasses.replace(base.config, population=population, generations=1)
        inputs = MppiInputs(config, 0)
        for name in ("sequential", "scanned") if population != 4 else ("sequential",):
            backend = scenario.backend(name)
            prepared = backend.prepare(inputs, size)
            jax.block_until_ready(backend.run(prepared))
            counts, _ = trace_calls(backend.run, prepared)
            dispatches[name, population] = counts.dispatches
    step = dispatches["sequential", 4] - dispatches["sequential", 2]
    assert step > 0 and dispatches["sequential", 6] - dispatches["sequential", 4] == step
    per_candidate = step / 2
    assert per_candidate >= config.control_steps  # at least one call per control step
    assert dispatches["scanned", 2] == dispatches["scanned", 6] == 1


def test_eager_backend_estimates_its_cost_when_skipped():
    scenario = bundled("mppi_tuning")
    backend = scenario.backend("sequential-eager")
    assert not backend.runs_at("default") and backend.runs_at("smoke")
    size = scenario.size("smoke")
    estimate = backend.estimate(scenario.make_inputs(size, 0, "float32"), size)
    assert estimate["estimated_s"] > 0 and estimate["measured_control_steps"] >= 1


def test_bad_input_is_refused():
    with pytest.raises(InputError, match="sigma bounds must be > 0"):
        check_bounds((0.1, 10.0), (0.0, 1.0))
    with pytest.raises(InputError, match="lambda bounds must be > 0"):
        check_bounds((-1.0, 10.0), (0.1, 1.0))
    with pytest.raises(InputError, match="low < high"):
        check_bounds((10.0, 1.0), (0.1, 1.0))
    fields = dict(samples=4, horizon=3, dt=0.1, control_steps=2, episodes=1, generations=1)
    with pytest.raises(InputError, match="population must be >= 2"):
        Config(system="pendulum", population=1, **fields)
    with pytest.raises(UnknownNameError, match="unknown system 'quadrotor'; choose one of"):
        Config(system="quadrotor", population=4, **fields)
    with pytest.raises(UnknownNameError, match="unknown dtype 'float64'"):
        bundled("mppi_tuning").make_inputs(bundled("mppi_tuning").size("smoke"), 0, "float64")


def test_candidates_are_clipped_to_the_bounds():
    params = params_from_candidate(jnp.asarray([-100.0, 100.0], jnp.float32))
    assert float(params.lambda_) == pytest.approx(1e-2, rel=1e-5)
    assert float(params.sigma) == pytest.approx(5.0, rel=1e-5)


@pytest.mark.parametrize(
    ("scale_per_generation", "message"),
    [
        ((1.0, 1.0), None),
        ((1.01, 1.01), "by a median 0.01"),  # every generation 1% off: a wrong evaluation
        ((1.0, 1.10), "generation 1: reported best fitness"),  # one 10% off
    ],
)
def test_check_bounds_the_typical_and_the_worst_generation(scale_per_generation, message):
    from scanbench.api import MismatchError
    from tests.conftest import scenario_case

    scenario, size, inputs, expected = scenario_case("mppi_tuning", "float32")
    backend = scenario.backend("scanned")
    result = backend.run(backend.prepare(inputs, size))
    scaled = result._replace(best_fitness=np.asarray(result.best_fitness) * scale_per_generation)
    if message is None:
        assert scenario.check(scaled, expected, "float32") < 1e-4
    else:
        with pytest.raises(MismatchError, match=message):
            scenario.check(scaled, expected, "float32")


def test_loading_an_mppi_scenario_leaves_numba_unimported():
    """A cell's worker loads its scenario afresh; Numba (~0.15 s to import) is imported
    by the Numba cells' prepare only, not by the 12 MPPI cells that never use it."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from scanbench.sources import load\n"
        "for source in ('scanbench.scenarios.mppi_tuning:SCENARIO', "
        "'scanbench.scenarios.mppi_tuning:CARTPOLE_SCENARIO'):\n"
        "    load(source)\n"
        "print('numba' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr


_COUNT_RANGE_REDUCTIONS = """
import re, sys
import jax, jax.numpy as jnp
from scanbench.scenarios.mppi_tuning.controller import Config, rollout_costs

config = Config(sys.argv[1], samples=16, horizon=3, dt=0.1, control_steps=1, episodes=1,
                population=2, generations=1)
x = jnp.zeros(config.dynamics.state_dim, jnp.float32)
controls = jnp.zeros((config.horizon, config.samples), jnp.float32)
text = jax.jit(lambda x, u: rollout_costs(x, u, config)).lower(x, controls).compile().as_text()
bodies, name = {}, None
for line in text.splitlines():
    if line and not line.startswith(" ") and line.endswith("{"):
        name = line.split()[0].lstrip("%")
        bodies[name] = []
    elif name is not None and line.startswith("  "):
        bodies[name].append(line)

def reductions(body):
    own = sum(bool(re.search(r"= \\S+ round-nearest-even\\(", line)) for line in bodies[body])
    called = re.findall(r"calls=%?([\\w.\\-]+)", "\\n".join(bodies[body]))
    return own + sum(reductions(callee) for callee in called)

loops = [re.search(r"body=%?([\\w.\\-]+)", line).group(1)
         for lines in bodies.values() for line in lines if " while(" in line]
print(*(reductions(body) for body in loops))
"""


@pytest.mark.parametrize("system", ["pendulum", "cartpole"])
def test_each_rk4_stage_is_computed_once_per_rollout_step(system):
    """With the flags the JAX backends declare, XLA:CPU evaluates each RK4 stage's
    sine-cosine range reduction once per rollout step: 4 stages and the angle wrap of the
    running cost. Without multi-output fusion it recomputed them in every state
    component's fusion (16 per step on the cart-pole; performance log, 2026-11-26)."""
    import os
    import subprocess
    import sys

    from scanbench.scenarios.mppi_tuning.compiler_flags import flags_for

    environ = {**os.environ, "XLA_FLAGS": " ".join(flags_for(system))}
    out = subprocess.run(
        [sys.executable, "-c", _COUNT_RANGE_REDUCTIONS, system],
        capture_output=True,
        text=True,
        check=True,
        env=environ,
    )
    assert out.stdout.split() == ["5"], out.stdout + out.stderr

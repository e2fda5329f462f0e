"""QD tuning (CMA-ME over MPPI): the JAX archive does what pyribs' does, the check catches
what it should, and the tuner's loop costs exactly one dispatch and one host conversion
per solution.

The pyribs tests share one process-wide pyribs (its import and its uncached Numba compile
cost ~10-25 s once per process on a 2-core machine): they are few, at `smoke` size.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scanbench import ArchiveMap, extras
from scanbench.api import InputError, MismatchError
from scanbench.growth.points import GrowSpec, sweep_of
from scanbench.probes.conversions import count_conversions
from scanbench.probes.trace import trace_calls
from scanbench.scenarios.qd_tuning import backends
from scanbench.scenarios.qd_tuning.cma_me_scan import (
    cell_of,
    empty_archive,
    insert,
    two_stage_ranks,
)
from scanbench.scenarios.qd_tuning.evaluation import evaluate, evaluate_population
from scanbench.scenarios.qd_tuning.problem import (
    MEASURE_LOWER,
    MEASURE_UPPER,
    QD_SCORE_OFFSET,
    QdInputs,
    cell_index,
    evaluation_keys,
    root_key,
)
from tests.conftest import bundled, scenario_case

SCENARIOS = ["qd_tuning", "qd_tuning_cartpole"]
SOURCE = "scanbench.scenarios.qd_tuning:SCENARIO"


def smoke_inputs(scenario_name: str = "qd_tuning", **changes) -> tuple:
    scenario = bundled(scenario_name)
    size = scenario.size("smoke")
    inputs = scenario.make_inputs(size, 0, "float32")
    config = dataclasses.replace(inputs.config, **changes)
    return scenario, size, QdInputs(config, 0)


def test_one_solution_and_the_population_evaluate_alike():
    """`evaluate` (the sequential loop's call) and `evaluate_population` (the batched
    backends') give the same values, which the float64 reference reproduces (the
    cart-pole's: every cell's check, `tests/engine/test_backends.py`)."""
    scenario_name = "qd_tuning"
    _, _, inputs = smoke_inputs(scenario_name)
    mppi = inputs.config.mppi
    keys = evaluation_keys(root_key(0), mppi.episodes)
    solutions = np.array(
        [[0.0, 0.0, 0.0], [-3.0, 1.0, 0.8], [2.0, -2.0, -0.5], [-9.0, 9.0, 3.0]], np.float32
    )
    batched = np.asarray(jax.jit(lambda k, z: evaluate_population(k, z, mppi))(keys, solutions))
    one = jax.jit(lambda k, z: evaluate(k, z, mppi))
    single = np.stack([np.asarray(one(keys, z)) for z in solutions])
    np.testing.assert_allclose(batched, single, rtol=1e-5, atol=1e-6)
    expected = bundled(scenario_name).reference(inputs).evaluate64(solutions)
    np.testing.assert_allclose(batched[:, 0], expected[:, 0], rtol=1e-3)
    np.testing.assert_allclose(batched[:, 1:], expected[:, 1:], atol=1e-3)
    assert np.all((batched[:, 1:] >= 0.0) & (batched[:, 1:] <= 1.0))


def test_cells_are_pyribs_cells():
    """The JAX cell index, the NumPy one and pyribs' ``index_of`` agree, edges included."""
    ribs_archives = pytest.importorskip("ribs.archives")
    cells = (5, 7)
    rng = np.random.default_rng(0)
    measures = rng.uniform(-0.1, 1.1, (200, 2)).astype(np.float32)
    measures[:4] = [[0.0, 0.5], [1.0, 1.0], [0.2, 0.6], [0.6, 0.9]]  # boundaries
    archive = ribs_archives.GridArchive(
        solution_dim=1, dims=cells, ranges=list(zip(MEASURE_LOWER, MEASURE_UPPER, strict=True))
    )
    expected = archive.index_of(measures)
    config = smoke_inputs()[2].config
    config = dataclasses.replace(config, cells=cells)
    np.testing.assert_array_equal(cell_index(measures, cells), expected)
    np.testing.assert_array_equal(np.asarray(cell_of(jnp.asarray(measures), config)), expected)


def test_insertion_and_ranking_are_pyribs_batch_add_and_two_stage_ranker():
    """Two batches into an empty archive (new cells, improvements, several solutions in
    one cell, losers): the JAX archive holds pyribs' elites, with pyribs' statuses and
    values, and ranks them in the two-stage improvement order."""
    ribs_archives = pytest.importorskip("ribs.archives")
    config = dataclasses.replace(smoke_inputs()[2].config, cells=(3, 3))
    archive = ribs_archives.GridArchive(
        solution_dim=3,
        dims=config.cells,
        ranges=list(zip(MEASURE_LOWER, MEASURE_UPPER, strict=True)),
        qd_score_offset=QD_SCORE_OFFSET,
    )
    ours = empty_archive(config)
    rng = np.random.default_rng(1)
    for _ in range(2):
        solutions = rng.normal(size=(24, 3)).astype(np.float32)
        values = np.column_stack(
            [rng.normal(-5.0, 1.0, 24), rng.uniform(0, 1, 24), rng.uniform(0.5, 1, 24)]
        ).astype(np.float32)
        info = archive.add(solutions, values[:, 0], values[:, 1:])
        ours, status, value = insert(ours, jnp.asarray(solutions), jnp.asarray(values), config)
        np.testing.assert_array_equal(np.asarray(status), info["status"])
        np.testing.assert_allclose(np.asarray(value), info["value"], rtol=1e-6)
        ranks = np.asarray(two_stage_ranks(status, value))
        ribs_order = np.flip(np.lexsort((info["value"], info["status"])))
        np.testing.assert_array_equal(np.argsort(ranks), ribs_order)
    elites = archive.data(["index", "solution", "objective"], return_type="dict")
    occupied = np.asarray(ours["occupied"])
    np.testing.assert_array_equal(np.flatnonzero(occupied), np.sort(elites["index"]))
    order = np.argsort(elites["index"])
    np.testing.assert_allclose(np.asarray(ours["value"])[occupied, 0],
                               elites["objective"][order], rtol=1e-6)  # fmt: skip
    np.testing.assert_array_equal(np.asarray(ours["solution"])[occupied],
                                  elites["solution"][order])  # fmt: skip
    assert archive.stats.qd_score == pytest.approx(
        float(np.sum(np.asarray(ours["value"])[occupied, 0] - QD_SCORE_OFFSET)), rel=1e-6
    )


@pytest.fixture(scope="module")
def scanned_prepared():
    """The scanned backend compiled once for this module (a compile costs seconds)."""
    scenario, size, inputs, _ = scenario_case("qd_tuning", "float32")
    backend = scenario.backend("scanned")
    return backend, backend.prepare(inputs, size)


@pytest.fixture(scope="module")
def scanned_case(scanned_prepared):
    scenario, _, _, expected = scenario_case("qd_tuning", "float32")
    backend, prepared = scanned_prepared
    return scenario, expected, jax.device_get(backend.run(prepared))


def test_the_check_accepts_the_scanned_archive(scanned_case):
    scenario, expected, output = scanned_case
    assert scenario.check(output, expected, "float32") < 1e-4
    described = scenario.describe_output(output)
    assert 0 < described["coverage"] <= 1 and described["qd_score_per_generation"][-1] > 0
    archive = ArchiveMap.from_output(described)  # the HTML report's heatmap
    assert archive.cells == (5, 5) and archive.occupied == described["elites"]
    filled = np.asarray(output.elite_value)[np.asarray(output.occupied), 0]
    drawn = [value for row in archive.objective for value in row if value is not None]
    np.testing.assert_allclose(sorted(drawn), sorted(filled), atol=1e-4)


def _moved(output, cell_from: int, cell_to: int):
    """The elite of ``cell_from`` moved, values and all, into the empty ``cell_to``."""
    occupied = np.array(output.occupied)
    solution, value = np.array(output.elite_solution), np.array(output.elite_value)
    occupied[cell_to], occupied[cell_from] = True, False
    solution[cell_to], value[cell_to] = solution[cell_from], value[cell_from]
    return output._replace(occupied=occupied, elite_solution=solution, elite_value=value)


def _scaled(output, field: str, column: int, factor: float, rows=slice(None)):
    values = np.array(getattr(output, field))
    values[rows, column] *= factor
    return output._replace(**{field: values})


def _shifted(output, field: str, column: int, shift: float, rows=slice(None)):
    values = np.array(getattr(output, field))
    values[rows, column] += shift
    return output._replace(**{field: values})


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (lambda out: _moved(out, *_full_and_empty(out)), "elites lie outside their cell"),
        (lambda out: _scaled(out, "elite_value", 0, 1.1), "reported QD score"),
        (lambda out: _scaled(out, "best_value", 0, 1.1, rows=0), "objective differs"),
        (lambda out: _shifted(out, "best_value", 1, 0.2, rows=0), "a measure differs"),
        (lambda out: out._replace(qd_score=np.asarray(out.qd_score) + 1.0), "reported QD score"),
        (lambda out: out._replace(best_value=np.asarray(out.best_value)[:1]), "has shape"),
    ],
    ids=["wrong-cell", "objective-vs-score", "objectives", "measure", "score", "shape"],
)
def test_the_check_catches_a_spoiled_archive(scanned_case, spoil, message):
    scenario, expected, output = scanned_case
    with pytest.raises(MismatchError, match=message):
        scenario.check(spoil(output), expected, "float32")


def _full_and_empty(output) -> tuple[int, int]:
    """An occupied cell and an empty cell at least two rows of the grid away from it."""
    occupied = np.asarray(output.occupied)
    full = int(np.flatnonzero(occupied)[0])
    columns = round(len(occupied) ** 0.5)  # the smoke grid is square
    empty = [c for c in np.flatnonzero(~occupied) if abs(c // columns - full // columns) >= 2]
    return full, int(empty[0])


def test_without_pyribs_its_backends_are_skipped_with_the_reason(monkeypatch):
    monkeypatch.setattr(extras, "available", lambda module: module != "ribs")
    built = {backend.name: backend for backend in backends()}
    for name in ("sequential", "library", "numba"):
        assert not built[name].runs_at("smoke") and not built[name].runs_at("default")
        assert "pip install 'scanbench[mppi]'" in built[name].skip_reason
    assert built["scanned"].runs_at("smoke")


def test_loading_the_qd_scenarios_leaves_pyribs_unimported():
    """Importing pyribs costs seconds: only the cells that drive it pay."""
    code = (
        "import sys\n"
        "from scanbench.sources import load\n"
        "for source in ('scanbench.scenarios.qd_tuning:SCENARIO', "
        "'scanbench.scenarios.qd_tuning:CARTPOLE_SCENARIO'):\n"
        "    load(source)\n"
        "print('ribs' in sys.modules, 'numba' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False", out.stdout + out.stderr


def _counted(backend, prepared):
    jax.block_until_ready(backend.run(prepared))
    counts, _ = trace_calls(backend.run, prepared)
    conversions = count_conversions(lambda: jax.block_until_ready(backend.run(prepared)))
    return counts, conversions


def test_the_tuners_loop_costs_one_dispatch_and_one_conversion_per_solution(scanned_prepared):
    """The sequential loop: exactly one dispatch (the jitted evaluation) and one host
    conversion (``np.asarray`` of its result) per solution, nothing else; ``library``:
    one of each per generation; ``scanned``: one dispatch, no conversion."""
    pytest.importorskip("ribs")
    scenario, size, inputs, _ = scenario_case("qd_tuning", "float32")
    config = inputs.config
    solutions = config.population * config.generations
    found = {"scanned": _counted(*scanned_prepared)}
    for name in ("sequential", "library"):
        backend = scenario.backend(name)
        found[name] = _counted(backend, backend.prepare(inputs, size))
    counts, conversions = found["sequential"]
    assert counts.dispatches == solutions, counts.dispatches_by_function
    assert conversions.total == solutions and conversions.by_kind == {"np.asarray": solutions}
    counts, conversions = found["library"]
    assert counts.dispatches == config.generations, counts.dispatches_by_function
    assert conversions.by_kind == {"np.asarray": config.generations}
    counts, conversions = found["scanned"]
    assert counts.dispatches == 1 and conversions.total == 0


_SHARDED_EVALUATION = """
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=3"
import json, jax, numpy as np
from scanbench.scenarios.qd_tuning import SCENARIO
from scanbench.scenarios.qd_tuning.evaluation import evaluate_population
from scanbench.scenarios.qd_tuning.problem import evaluation_keys, root_key
from scanbench.scenarios.qd_tuning.sharded import AXIS, sharded_evaluate
from scanbench.sharding.placement import mesh_1d
mppi = SCENARIO.make_inputs(SCENARIO.size("smoke"), 0, "float32").config.mppi
keys = evaluation_keys(root_key(0), mppi.episodes)
rng = np.random.default_rng(0)
found = {"devices": len(jax.devices())}
for count in (6, 7):  # a multiple of 3, and one that needs padding
    solutions = rng.normal(size=(count, 3)).astype(np.float32)
    plain = jax.jit(lambda k, z: evaluate_population(k, z, mppi))(keys, solutions)
    sharded = jax.jit(sharded_evaluate(mppi, mesh_1d(AXIS)))(keys, solutions)
    plain, sharded = np.asarray(plain), np.asarray(sharded)
    found[str(count)] = bool(np.allclose(plain, sharded, rtol=1e-6, atol=1e-7))
print(json.dumps(found))
"""


def test_the_sharded_evaluation_is_the_plain_one_on_three_devices():
    """Solutions split over 3 devices (padded when they do not divide) get the values of
    the unsharded evaluation, to a few float32 ulps: XLA's arithmetic depends on the batch
    shape at that level (3 solutions, one per device, equal 3 evaluations of one solution
    bit for bit, and one evaluation of all 3 to 6e-8). The rest of `sharded` is
    `scanned`'s scan (its cells pass the check, `tests/engine/test_backends.py`)."""
    import json

    out = subprocess.run([sys.executable, "-c", _SHARDED_EVALUATION],
                         capture_output=True, text=True, check=True)  # fmt: skip
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found == {"devices": 3, "6": True, "7": True}, out.stderr[-2000:]


def test_the_seeds_comparison_fails_a_search_outside_pyribs_range():
    from scanbench.scenarios.qd_tuning.seed_comparison import verdict

    pyribs = [{"coverage": c, "qd_score": 10 * c} for c in (0.2, 0.3, 0.25)]
    inside = [{"coverage": c, "qd_score": 10 * c} for c in (0.22, 0.28, 0.4)]
    outside = [{"coverage": c, "qd_score": 10 * c} for c in (0.1, 0.12, 0.4)]
    assert verdict({"pyribs": pyribs, "jax": inside})[0]
    within, lines = verdict({"pyribs": pyribs, "jax": outside})
    assert not within and "coverage  JAX median OUTSIDE pyribs' range" in lines


def test_the_population_axis_grows_the_batch_and_a_grown_size_passes_the_check():
    """``--grow population=...``: the batch grows, the emitters stay, every size says its
    population; a population the emitters do not divide is refused naming the fix; the
    scanned backend at a grown size passes the scenario's check."""
    scenario = bundled("qd_tuning")
    sweep = sweep_of(GrowSpec("population", 2, 8, factor=2), scenario, SOURCE, "smoke", "float32")
    assert sweep.values == (2, 4, 8)  # smoke's own population is 4
    names = [sweep.size_name(value) for value in sweep.values]
    assert names == ["smoke@population=2", "smoke", "smoke@population=8"]
    for value, name in zip(sweep.values, names, strict=True):
        size = scenario.size(name)
        assert (size["population"], size["batch"], size["emitters"]) == (value, value, 1)
        assert scenario.work(size, "float32")["evaluations"] == value * size["generations"]
    assert scenario.size("smoke@emitters=3")["population"] == 12
    assert scenario.size("smoke@batch=3")["population"] == 3
    assert scenario.size("large@population=60")["batch"] == 4  # 15 emitters
    with pytest.raises(InputError, match=r"multiples of its 15 emitters.*grow `batch`"):
        scenario.size("large@population=20")
    scenario, size, inputs, expected = scenario_case("qd_tuning", "float32", names[0])
    backend = scenario.backend("scanned")
    output = jax.device_get(backend.run(backend.prepare(inputs, size)))
    assert output.best_value.shape == (size["generations"], 3)
    scenario.check(output, expected, "float32")  # raises MismatchError on a wrong answer


def test_several_emitters_restart_each_from_its_own_elite():
    """With more than one emitter, a restart initialises each emitter at its own picked
    elite (the means vmapped with the keys): before, the picked elites were read as one
    15 x 3 = 45-dimensional mean, and `large` (15 emitters) failed to trace."""
    scenario, size, inputs, expected = scenario_case("qd_tuning", "float32", "smoke@emitters=3")
    backend = scenario.backend("scanned")
    output = jax.device_get(backend.run(backend.prepare(inputs, size)))
    assert output.best_value.shape == (size["generations"], 3)
    scenario.check(output, expected, "float32")

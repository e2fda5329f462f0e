"""The seed's pattern in miniature (`scanbench.scenarios.seed_style`), profiled as its user
would: one wrapped call, a setup that restores the tuner's state, exact counts, the
diagnosis naming the recompilation first and the per-candidate conversions next; and
its rewrites through `compare`, which agree with it on the same seed."""

from __future__ import annotations

import copy

import pytest

import scanbench
from scanbench.diagnosis import Cost
from scanbench.scenarios.seed_style import library, rewrites

pytestmark = pytest.mark.slow

QUICK = scanbench.TimingConfig(warmup=0, min_time_s=0.0, min_count=1, max_time_s=0.05)
SMALL = rewrites.Problem(samples=8, horizon=4, steps=2, population=3)


def tuned(problem: rewrites.Problem):
    """A tuner and a setup that puts it back where it started (the user's snapshot)."""
    tuner = library.Autotuner(problem, seed=0)
    snapshot = copy.deepcopy(tuner.__dict__)

    def restore() -> None:
        tuner.__dict__.update(copy.deepcopy(snapshot))

    return tuner, restore


def profiled(problem: rewrites.Problem) -> scanbench.Profile:
    tuner, restore = tuned(problem)
    return scanbench.profile(
        lambda: tuner.optimize_step(),
        name="optimize_step",
        strategy="sequential",
        setup=restore,
        timing=QUICK,
    )


@pytest.fixture(scope="module")
def seed_profile() -> scanbench.Profile:
    return profiled(SMALL)


def test_without_a_setup_the_state_is_named_and_the_two_ways_on(tmp_path):
    tuner, _ = tuned(SMALL)
    result = scanbench.profile(lambda: tuner.optimize_step(), name="step", strategy="sequential",
                               timing=QUICK, probes=False)  # fmt: skip
    assert result.record.status == "failed"
    error = result.record.error
    assert error.startswith("StatefulError: the output changes from call to call")
    assert "GenerationResult.fitness" in error and "setup=" in error and "check=False" in error


def test_unchecked_is_timed_and_says_so():
    tuner, _ = tuned(SMALL)
    result = scanbench.profile(lambda: tuner.optimize_step(), name="step", strategy="sequential",
                               timing=QUICK, probes=False, check=False)  # fmt: skip
    assert result.record.status == "ok" and not result.record.checked
    assert "unchecked" in result.text() and "not jitted" in result.text()


def test_every_host_conversion_and_recompilation_is_counted_exactly(seed_profile):
    population, steps = SMALL.population, SMALL.steps
    assert seed_profile.record.status == "ok", seed_profile.record.error
    counts = seed_profile.counts
    conversions = seed_profile.record.counts.conversions
    assert counts["host_conversions"] == 2 * population
    assert conversions["by_kind"] == {"float": population, "np.array": population}
    assert conversions["by_function"] == {
        "scanbench.scenarios.seed_style.library.optimize_step": 2 * population
    }
    compilations = seed_profile.record.counts.compilations
    assert compilations["by_function"]["scan"]["compile"] == population * steps
    (miss, *_) = compilations["misses"]
    assert miss["where"].startswith(library.__file__) and "re-defined" in miss["reason"]


def test_each_candidate_costs_the_same_dispatches_exactly(seed_profile):
    """The loop's dispatches are exactly fixed + P x per candidate (counted at P = 2, 3
    and 4: the third lands on the line through the first two), and a candidate costs at
    least the dispatches of its episode (`evaluate`, counted on its own)."""
    tuner, restore = tuned(SMALL)
    episode = scanbench.profile(tuner.evaluate, name="evaluate", strategy="sequential",
                                setup=restore, timing=QUICK)  # fmt: skip
    counted = {
        population: profiled(rewrites.Problem(8, 4, 0.1, 2, population)).counts["dispatches"]
        for population in (2, 4)
    }
    counted[3] = seed_profile.counts["dispatches"]
    per_candidate = counted[3] - counted[2]
    assert counted[4] == counted[2] + 2 * per_candidate
    assert per_candidate >= episode.counts["dispatches"] > 0


def test_the_diagnosis_names_the_recompilation_then_the_conversions(seed_profile):
    first, second, *_ = seed_profile.diagnosis
    assert first.cost == Cost.RECOMPILE
    text = first.text()
    assert "`scan` compiled 6 times per call" in text
    assert "library.py" in text and "a new function object on every call" in text
    assert second.cost == Cost.GPU_SYNC and second.estimate
    assert "np.array 3" in second.text() and "float 3" in second.text()
    assert "optimize_step 6" in second.text()


def test_the_rewrites_agree_with_the_library_and_each_dispatch_once():
    tuner, restore = tuned(SMALL)
    built = rewrites.build(SMALL, seed=0)
    table = scanbench.compare(
        {
            "library loop": lambda: tuner.optimize_step(),
            "pure loop": built.pure_loop,
            "vmapped": built.vmapped,
            "scanned": built.scanned,
        },
        reference="library loop",
        setup={"library loop": restore},
        strategies={"pure loop": "sequential"},
        rtol=1e-4,
        timing=QUICK,
    )
    assert list(table["status"]) == ["ok"] * 4, table[["status", "error"]].to_dict()
    assert table.loc["vmapped", "dispatches"] == table.loc["scanned", "dispatches"] == 1
    assert table.loc["library loop", "compiles"] >= SMALL.population * SMALL.steps
    assert table.loc["scanned", "compiles"] == 0

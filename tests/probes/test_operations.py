"""Operations per call from XLA's cost analysis, every loop's trip count applied
(`scanbench.probes.operations`)."""

from __future__ import annotations

import pytest

from scanbench.probes.operations import count_operations, operations_of, with_entry

TRIPS = 'backend_config={"known_trip_count":{"n":"%d"}}'
NESTED = """HloModule nested

%inner_body (p: (s32[], f32[8])) -> (s32[], f32[8]) {
  %p = (s32[], f32[8]) parameter(0)
  ROOT %t = (s32[], f32[8]) tuple(%p)
}

%inner_cond (p: (s32[], f32[8])) -> pred[] {
  %p = (s32[], f32[8]) parameter(0)
  ROOT %c = pred[] constant(true)
}

%outer_body (p: (s32[], f32[8])) -> (s32[], f32[8]) {
  %p = (s32[], f32[8]) parameter(0)
  %w = (s32[], f32[8]) while(%p), condition=%inner_cond, body=%inner_body, INNER_TRIPS
  ROOT %t = (s32[], f32[8]) tuple(%w)
}

%outer_cond (p: (s32[], f32[8])) -> pred[] {
  %p = (s32[], f32[8]) parameter(0)
  ROOT %c = pred[] constant(true)
}

%native (p: (s32[], f32[8])) -> (s32[], f32[8]) {
  %p = (s32[], f32[8]) parameter(0)
  ROOT %w = (s32[], f32[8]) while(%p), condition=%outer_cond, body=%outer_body, OUTER_TRIPS
}

ENTRY %main (x: (s32[], f32[8])) -> (s32[], f32[8]) {
  %x = (s32[], f32[8]) parameter(0)
  ROOT %call = (s32[], f32[8]) call(%x), to_apply=%native, NATIVE
}
"""
NATIVE = 'frontend_attributes={xla_cpu_small_call="true"}'
NESTED = (
    NESTED.replace("INNER_TRIPS", TRIPS % 7)
    .replace("OUTER_TRIPS", TRIPS % 5)
    .replace("NATIVE", NATIVE)
)

# inclusive costs as XLA's cost analysis gives them: a loop's body and condition once
INNER = {"flops": 10.0, "transcendentals": 1.0, "bytes accessed": 64.0}
INNER_COND = {"flops": 1.0}
OUTER_OWN = {"flops": 100.0, "bytes accessed": 32.0}
COSTS = {
    "inner_body": INNER,
    "inner_cond": INNER_COND,
    "outer_body": {k: OUTER_OWN.get(k, 0) + INNER.get(k, 0) + INNER_COND.get(k, 0) for k in INNER},
    "outer_cond": {"flops": 1.0},
    "main": {"flops": 100 + 10 + 1 + 1 + 1000, "transcendentals": 1.0, "bytes accessed": 96.0},
}


def test_nested_loops_count_each_body_times_the_trip_counts_around_it():
    counted = count_operations(NESTED, COSTS.__getitem__)
    # 1000 outside, 5 x (100 + 1 outer condition), 5 x 7 x (10 + 1 inner condition)
    assert counted.flops == pytest.approx(1000 + 5 * 101 + 35 * 11)
    assert counted.transcendentals == pytest.approx(35)
    assert counted.bytes_accessed == pytest.approx(5 * 32 + 35 * 64)
    assert counted.loops == 2 and counted.error is None


def test_a_loop_of_unknown_trip_count_leaves_the_count_unknown_with_its_name():
    text = NESTED.replace(", " + TRIPS % 7, "")
    counted = count_operations(text, COSTS.__getitem__)
    assert counted.flops is None and "%w" not in counted.error and "w has no known" in counted.error


def test_a_computation_becomes_the_entry_of_the_module():
    text = with_entry(NESTED, "outer_body")
    assert "ENTRY %outer_body (" in text and "ENTRY %main" not in text
    with pytest.raises(ValueError, match="no computation 'missing'"):
        with_entry(NESTED, "missing")


def test_a_compiled_scan_counts_every_step():
    """XLA's own cost analysis counts the scan's body once; the probe, once per step."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    x = jnp.ones(1024, jnp.float32)

    def steps(n):
        def kernel(x):
            scan = lax.scan(lambda c, _: (jnp.sin(c) * 0.5 + 1.0, None), x, None, length=n)[0]
            return scan * 3.0 + x

        return jax.jit(kernel).lower(x).compile()

    short, long = operations_of(steps(10)), operations_of(steps(100))
    assert short.error is None and long.error is None
    per_step = (long.flops - short.flops) / 90
    assert per_step == pytest.approx(2 * 1024, rel=0.01)  # a multiply and an add per element
    assert (long.transcendentals - short.transcendentals) / 90 == pytest.approx(1024)
    assert steps(100).cost_analysis()["flops"] < long.flops / 50  # what XLA alone says


def test_a_scan_with_a_donated_argument_counts_every_step():
    """A donated argument aliases an output of the entry computation (the module header's
    ``input_output_alias``): a loop body made the entry has no such output, and XLA's
    parser refused the module until the alias was dropped with the old entry."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    x = jnp.ones(1024, jnp.float32)

    def steps(n):
        def kernel(x, out):
            scan = lax.scan(lambda c, _: (jnp.sin(c) * 0.5 + 1.0, None), x, None, length=n)[0]
            return out.at[:].set(scan), scan.sum()  # a tuple: the alias is at {0}

        return jax.jit(kernel, donate_argnums=1).lower(x, x).compile()

    assert "input_output_alias" in steps(10).as_text()
    short, long = operations_of(steps(10)), operations_of(steps(100))
    assert short.error is None and long.error is None, short.error
    assert (long.transcendentals - short.transcendentals) / 90 == pytest.approx(1024)


def test_a_library_routine_is_opaque_and_makes_the_count_a_lower_bound():
    import jax
    import jax.numpy as jnp
    from jax import lax

    a = jnp.ones((10, 100), jnp.float32)
    solve = jax.jit(lambda a: lax.linalg.tridiagonal_solve(a, a, a, a[..., None]))
    counted = operations_of(solve.lower(a).compile())
    assert counted.error is None and counted.custom_calls >= 1


def test_a_partitioned_module_counts_every_partitions_work():
    header = NESTED.replace("HloModule nested", "HloModule nested, num_partitions=4", 1)
    one, four = (count_operations(t, COSTS.__getitem__) for t in (NESTED, header))
    assert one.partitions == 1 and four.partitions == 4
    assert four.flops == 4 * one.flops and four.bytes_accessed == 4 * one.bytes_accessed


SHARDED_TWIN = """
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from scanbench.probes.operations import operations_of

def step(x):
    return jax.lax.fori_loop(0, 10, lambda i, y: jnp.sin(y) * y + 1.0, x).sum(axis=1)

x = np.ones((64, 128), np.float32)
alone = operations_of(jax.jit(step).lower(x).compile())
mesh = Mesh(np.array(jax.devices()[:2]), ("rows",))
sharded = jax.jit(step, in_shardings=NamedSharding(mesh, P("rows")))
split = operations_of(sharded.lower(x).compile())
print(alone.flops, alone.transcendentals, split.flops, split.transcendentals, split.partitions)
"""


def test_a_sharded_program_counts_what_its_unsharded_twin_counts():
    """Issue 66: the cost analysis of a 2-device program counted one partition, half the
    unsharded count, and the arithmetic floor came out 2x low."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    out = subprocess.run(
        [sys.executable, "-c", SHARDED_TWIN], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    flops, transcendentals, split_flops, split_transcendentals, partitions = map(float, out)
    assert partitions == 2
    assert split_transcendentals == transcendentals == 64 * 128 * 10
    assert split_flops == pytest.approx(flops, rel=0.05)

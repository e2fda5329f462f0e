"""The XLA:CPU flags the JAX MPPI backends declare for their workers (`Backend.xla_flags`).

The rollouts are most of a tuning run, and XLA:CPU's defaults leave four things on the
table there (each measured on the rollouts alone: see the performance log, #37):

- ``--xla_cpu_prefer_vector_width=512``: XLA:CPU emits 256-bit loops by default (``<8 x
  float>``); at 512 the fused RK4 loops run on 16 lanes. A preference: a CPU without
  512-bit vectors keeps its own width;
- ``--xla_cpu_enable_fast_math=true``: lets LLVM contract multiply-adds into FMAs and
  reassociate, as the Numba reference does (``fastmath=True``); NaN, inf and division
  stay honoured (XLA's ``xla_cpu_fast_math_honor_*`` defaults);
- ``xla_cpu_use_multi_output_fusion`` (a backend option): with it XLA:CPU stops
  duplicating producers into their consumers' fusions, so each RK4 stage's sine and
  cosine are computed once per step. Without it, the pendulum's rollout step evaluates
  8 range reductions (4 stages and the angle wrap need 5), the cart-pole's 16: each state
  component's fusion recomputes the stages it reads. With it, both evaluate 5; the
  cart-pole's step becomes 47 small fusions instead of 14, and is still faster on an
  AVX2 CPU (performance log, 2026-11-26, "MPPI's RK4 stages once per step"; on the
  AVX-512 machine of #37 it was slower, 1.50 against 1.13 ms).
- ``xla_cpu_small_while_loop_byte_threshold=1000000000`` (a backend option, as the
  tridiagonal blocked solvers declare it): lets XLA:CPU compile a while loop into one
  native kernel instead of running every iteration as a sequence of thunks (the
  cart-pole's rollout step is 47 fusions). `sharded` at ``default`` then took 0.785
  [0.762-0.822] of its time on the pendulum and 0.952 [0.939-0.977] on the cart-pole
  (one interleaved job each; the same performance log section).

XLA reads its backend options from one flag, comma-separated: `BACKEND_OPTIONS`.

`DEFAULT_FLAGS` is what the ``-xla-default`` sibling backends declare: nothing, so the
gain stays a number in every run.
"""

from __future__ import annotations

VECTOR_WIDTH = "--xla_cpu_prefer_vector_width=512"
FAST_MATH = "--xla_cpu_enable_fast_math=true"
MULTI_OUTPUT_FUSION = "xla_cpu_use_multi_output_fusion"
SMALL_LOOPS = "xla_cpu_small_while_loop_byte_threshold=1000000000"
BACKEND_OPTIONS = f"--xla_backend_extra_options={MULTI_OUTPUT_FUSION},{SMALL_LOOPS}"

FLAGS = {
    "pendulum": (VECTOR_WIDTH, FAST_MATH, BACKEND_OPTIONS),
    "cartpole": (VECTOR_WIDTH, FAST_MATH, BACKEND_OPTIONS),
}
DEFAULT_FLAGS: tuple[str, ...] = ()


def flags_for(system: str) -> tuple[str, ...]:
    """The flags the JAX MPPI backends of ``system`` declare."""
    return FLAGS[system]

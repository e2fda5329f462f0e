"""The XLA:CPU flags the JAX MPPI backends declare for their workers (`Backend.xla_flags`).

The rollouts are most of a tuning run, and XLA:CPU's defaults leave three things on the
table there (each measured on the rollouts alone: see the performance log, #37):

- ``--xla_cpu_prefer_vector_width=512``: XLA:CPU emits 256-bit loops by default (``<8 x
  float>``); at 512 the fused RK4 loops run on 16 lanes. A preference: a CPU without
  512-bit vectors keeps its own width;
- ``--xla_cpu_enable_fast_math=true``: lets LLVM contract multiply-adds into FMAs and
  reassociate, as the Numba reference does (``fastmath=True``); NaN, inf and division
  stay honoured (XLA's ``xla_cpu_fast_math_honor_*`` defaults);
- ``xla_cpu_use_multi_output_fusion`` (a backend option): with it XLA:CPU stops
  duplicating producers into their consumers' fusions. The pendulum's RK4 step was three
  loop fusions that recomputed the stage arithmetic (7 sine evaluations per step instead
  of 4); with the option it is one fusion per stage (4). The cart-pole's stages use both
  sine and cosine, whose shared terms then become fusions of their own (48 per step
  instead of 14): with the two flags above it is *slower* there, so the cart-pole
  backends leave it out.

`DEFAULT_FLAGS` is what the ``-xla-default`` sibling backends declare: nothing, so the
gain stays a number in every run.
"""

from __future__ import annotations

VECTOR_WIDTH = "--xla_cpu_prefer_vector_width=512"
FAST_MATH = "--xla_cpu_enable_fast_math=true"
MULTI_OUTPUT_FUSION = "--xla_backend_extra_options=xla_cpu_use_multi_output_fusion"

FLAGS = {
    "pendulum": (VECTOR_WIDTH, FAST_MATH, MULTI_OUTPUT_FUSION),
    "cartpole": (VECTOR_WIDTH, FAST_MATH),
}
DEFAULT_FLAGS: tuple[str, ...] = ()


def flags_for(system: str) -> tuple[str, ...]:
    """The flags the JAX MPPI backends of ``system`` declare."""
    return FLAGS[system]

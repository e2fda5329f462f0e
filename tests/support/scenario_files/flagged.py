"""A tiny scenario whose backends declare XLA flags: none, a real one, a misspelt backend
option (XLA would ignore it silently) and an unknown flag (XLA would abort)."""

from __future__ import annotations

import numpy as np

from scanbench import Scenario, Size, Strategy, jax_backend

FUSION = "--xla_backend_extra_options=xla_cpu_use_multi_output_fusion"


def make_inputs(size: Size, seed: int, dtype: str) -> dict:
    return {"x": np.random.default_rng(seed).standard_normal(size.params["n"]).astype(dtype)}


def reference(inputs: dict) -> np.ndarray:
    return inputs["x"] * 2.0 + 1.0


def check(output, expected, dtype: str) -> float:
    return float(np.max(np.abs(np.asarray(output) - expected)))


def affine(inputs: dict):
    return inputs["x"] * 2.0 + 1.0


def backend(name: str, flags: tuple[str, ...]):
    return jax_backend(name, Strategy.VMAPPED, affine, xla_flags=flags, description=name)


SCENARIO = Scenario(
    name="flagged",
    description="backends that declare XLA flags",
    sizes={"smoke": Size("smoke", {"n": 256}), "default": Size("default", {"n": 4096})},
    make_inputs=make_inputs,
    reference=reference,
    check=check,
    work=lambda size, dtype: {"elements": size.params["n"]},
    backends={
        b.name: b
        for b in (
            backend("plain", ()),
            backend("fused", (FUSION,)),
            backend("typo", (FUSION + "n",)),
            backend("unknown", ("--xla_cpu_no_such_flag=true",)),
        )
    },
    throughput_unit="elements",
    dtypes=("float32",),
)

"""A scenario whose backends donate an output buffer: the donation model's known answers.

Written against the public API only, as a user's scenario file would be. Each backend
computes ``2 * x`` into a donated buffer of the same shape (argument 1):

- ``donated``: written in place, no copy (the buffer is taken, 0 copies);
- ``reversed-read``: also reads the donated buffer reversed (times 0), so XLA cannot write
  in place and copies (taken, 1 copy);
- ``not-taken``: compiled with ``donate_argnums=1`` but its output has another dtype, so
  jax cannot use the buffer and keeps it (the harness fails the cell);
- ``undeclared``: donates in its executable but declares no donation (refused in prepare).
"""

from __future__ import annotations

import numpy as np

from scanbench import Compiled, MismatchError, Scenario, Size, Strategy, compiled_backend


def make_inputs(size, seed, dtype):
    return np.random.default_rng(seed).standard_normal(size["n"]).astype(dtype)


def reference(inputs):
    return 2.0 * inputs


def check(output, expected, dtype):
    error = float(np.max(np.abs(np.asarray(output, dtype=np.float64) - expected)))
    if error > 1e-5:
        raise MismatchError("donates output differs", error, 1e-5)
    return error


def _into(x, buffer):
    return buffer.at[:].set(2.0 * x)


def _reversed_read(x, buffer):
    return 2.0 * x + 0.0 * buffer[::-1]


def _other_dtype(x, buffer):
    import jax.numpy as jnp

    return (2.0 * x).astype(jnp.float16 if x.dtype == jnp.float32 else jnp.float32)


def _compiler(fn, donate_argnums=1):
    def compile(inputs, size: Size) -> Compiled:
        import warnings

        import jax

        x = jax.device_put(inputs)
        buffer = jax.numpy.zeros_like(x)
        with warnings.catch_warnings():  # "not usable": the case under test
            warnings.simplefilter("ignore")
            executable = jax.jit(fn, donate_argnums=donate_argnums).lower(x, buffer).compile()
        return Compiled(executable, (x, buffer))

    return compile


_BACKENDS = [
    compiled_backend("donated", Strategy.SCANNED, _compiler(_into), donate=(1,)),
    compiled_backend("reversed-read", Strategy.SCANNED, _compiler(_reversed_read), donate=(1,)),
    compiled_backend("not-taken", Strategy.SCANNED, _compiler(_other_dtype), donate=(1,)),
    compiled_backend("undeclared", Strategy.SCANNED, _compiler(_into)),
    compiled_backend("plain", Strategy.SCANNED, _compiler(_into, donate_argnums=())),
]

SCENARIO = Scenario(
    name="donates",
    description="2 x into a donated buffer",
    sizes={"smoke": Size("smoke", {"n": 4096}), "default": Size("default", {"n": 1 << 20})},
    make_inputs=make_inputs,
    reference=reference,
    check=check,
    work=lambda size, dtype: {"elements": float(size["n"])},
    backends={backend.name: backend for backend in _BACKENDS},
    throughput_unit="elements",
    dtypes=("float32",),
)

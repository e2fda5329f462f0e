"""Backend factories over a scenario's pure function (optax/evosax style).

``jax_backend`` places the inputs on the default device and compiles ahead of time
(``jax.jit(fn).lower(inputs).compile()``) in the untimed ``prepare``, so the timed ``run``
is exactly one dispatch of a compiled executable. ``host_backend`` wraps a NumPy, SciPy or
Numba function; a Numba function is compiled in ``prepare`` by a call on tiny inputs.

Example:
    >>> import jax.numpy as jnp
    >>> from harness.api import Strategy
    >>> square = jax_backend("square", Strategy.VMAPPED, lambda x: jnp.square(x))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.api import Backend, Size, Strategy


def _identity(value: Any) -> Any:
    return value


def jax_backend(
    name: str,
    strategy: Strategy,
    fn: Callable[[Any], Any],
    *,
    description: str = "",
    layout: Callable[[Any], Any] = _identity,
    to_reference: Callable[[Any], Any] = _identity,
    sizes: frozenset[str] | None = None,
    skip_reason: str = "",
) -> Backend:
    """A backend that runs ``fn(inputs)`` as one AOT-compiled JAX executable.

    Args:
        name: CLI name.
        strategy: the loop organisation ``fn`` represents.
        fn: a pure function of the (laid-out) input pytree.
        description: one line for listings and reports.
        layout: untimed host-side change of layout before device placement (e.g. to
            time-major); it models data that already lives in that layout.
        to_reference: untimed conversion of the output back to the reference layout.
        sizes: size names the backend runs at (``None``: all).
        skip_reason: shown for the other sizes.
    """
    import jax

    def prepare(inputs: Any, size: Size) -> tuple[Any, Any]:
        args = jax.device_put(layout(inputs))
        compiled = jax.jit(fn).lower(args).compile()
        return compiled, args

    def run(prepared: tuple[Any, Any]) -> Any:
        compiled, args = prepared
        return compiled(args)

    return Backend(
        name=name,
        strategy=strategy,
        engine="jax",
        prepare=prepare,
        run=run,
        description=description,
        to_reference=to_reference,
        sizes=sizes,
        skip_reason=skip_reason,
        executables=lambda prepared: {name: (prepared[0], 1)},
    )


def host_backend(
    name: str,
    strategy: Strategy,
    engine: str,
    fn: Callable[[Any], Any],
    *,
    description: str = "",
    layout: Callable[[Any], Any] = _identity,
    to_reference: Callable[[Any], Any] = _identity,
    warm_inputs: Callable[[Any], Any] | None = None,
    sizes: frozenset[str] | None = None,
    skip_reason: str = "",
) -> Backend:
    """A backend that runs ``fn(inputs)`` on the host (NumPy, SciPy, Numba).

    Args:
        warm_inputs: if given, ``fn(warm_inputs(laid_out_inputs))`` is called once in
            ``prepare``: tiny inputs of the same types, so a Numba function is compiled
            for them without running the full workload.
        (the others as in ``jax_backend``.)
    """

    def prepare(inputs: Any, size: Size) -> Any:
        laid_out = layout(inputs)
        if warm_inputs is not None:
            fn(warm_inputs(laid_out))
        return laid_out

    return Backend(
        name=name,
        strategy=strategy,
        engine=engine,
        prepare=prepare,
        run=fn,
        description=description,
        to_reference=to_reference,
        sizes=sizes,
        skip_reason=skip_reason,
    )

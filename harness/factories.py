"""Backend factories: the only places that build backends, so that *``run`` returns a
ready result* holds by construction (optax/evosax style: data plus pure functions).

- `compiled_backend`: one AOT-compiled JAX executable and its device arguments, built in
  the untimed ``prepare``; ``run`` is exactly one dispatch of it, then a wait for the
  whole output. `jax_backend` is the common case of a pure function of the inputs. An
  executable compiled with ``donate_argnums`` declares them (``donate=``): each call then
  gets fresh copies of those arguments, made untimed before it, and the donation is
  checked (`scanbench.donation`).
- `loop_backend`: a host-driven loop (a Python loop of jitted calls, an ask/tell loop of
  another library); ``run`` waits for the whole output it returns.
- `host_backend`: NumPy, SciPy or Numba on the host; a Numba function is compiled in
  ``prepare`` by a call on tiny inputs.

Every ``run`` these factories build carries `READY_MARK`; the timing loop
(`scanbench.timing`) waits for the output again anyway, so a hand-built `Backend` (a user's
scenario file) is timed correctly too.

Example:
    >>> import jax.numpy as jnp
    >>> from scanbench.api import Strategy
    >>> square = jax_backend("square", Strategy.VMAPPED, lambda x: jnp.square(x))
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

from .api import Backend, Param, Size, Strategy
from .donation import Donated, check_declared
from .timing import block_until_ready

READY_MARK = "__scanbench_returns_ready__"


def _identity(value: Any) -> Any:
    return value


def parametric(make: Callable[..., Backend], **params: Param) -> Backend:
    """A backend with keyword parameters: ``make(**values) -> Backend`` builds it with any
    values, and it is registered with each `Param`'s default (``scanbench run --param
    NAME=V1,V2`` sweeps them).

    Example:
        >>> scanned = parametric(
        ...     lambda unroll: jax_backend("scan", Strategy.SCANNED, partial(f, unroll=unroll)),
        ...     unroll=Param(1, description="lax.scan(unroll=...)"),
        ... )
    """
    backend = make(**{name: param.default for name, param in params.items()})
    return dataclasses.replace(backend, params=dict(params), bind=make)


def chained(backend: Backend, how: str) -> Backend:
    """``backend`` declaring how it runs the scenario's dependent chains (``"serial"`` or
    ``"interleaved"``: `scanbench.api.Backend.chains`), also when built with other
    parameters (``--param``).

    Example:
        >>> solver = chained(host_backend("numba", Strategy.NUMBA, "numba", sweep), "serial")
    """
    make = backend.bind
    bind = None if make is None else (lambda **values: chained(make(**values), how))
    return dataclasses.replace(backend, chains=how, bind=bind)


def returns_ready(run: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``run`` wrapped so that it returns only once its whole output is ready."""
    if getattr(run, READY_MARK, False):
        return run

    @functools.wraps(run)
    def ready_run(prepared: Any) -> Any:
        return block_until_ready(run(prepared))

    setattr(ready_run, READY_MARK, True)
    return ready_run


def is_ready_run(run: Callable[[Any], Any]) -> bool:
    """True for a ``run`` built by these factories (it waits for its output)."""
    return bool(getattr(run, READY_MARK, False))


@dataclasses.dataclass(frozen=True)
class Compiled:
    """What a `compiled_backend` prepares: the executable and its (device) arguments.

    Attributes:
        executable: ``jax.jit(f).lower(*args).compile()``.
        args: the positional arguments ``run`` passes to it.
        state: anything else ``to_reference`` or a test may need (not passed to it).
        donated: set by `compiled_backend` when it declares donated arguments: the
            fresh copies each call gets (`scanbench.donation.Donated`).
    """

    executable: Any
    args: tuple[Any, ...]
    state: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    donated: Donated | None = None


def _call_compiled(prepared: Compiled) -> Any:
    if prepared.donated is not None:
        return prepared.executable(*prepared.donated.call_args())
    return prepared.executable(*prepared.args)


def _refresh_donated(prepared: Compiled) -> None:
    prepared.donated.refresh()


def _donating(
    name: str, compile: Callable[[Any, Size], Compiled], donate: tuple[int, ...]
) -> Callable[[Any, Size], Compiled]:
    """``compile`` whose executable must donate exactly ``donate`` (none: none), wrapped
    so that a donating one's arguments are held by a `Donated` (fresh copies before every
    call)."""

    def prepare(inputs: Any, size: Size) -> Compiled:
        compiled = compile(inputs, size)
        check_declared(name, compiled.executable, compiled.args, donate)
        if not donate:
            return compiled
        return dataclasses.replace(compiled, donated=Donated(compiled.args, donate, name))

    return prepare


def compiled_backend(
    name: str,
    strategy: Strategy,
    compile: Callable[[Any, Size], Compiled],
    *,
    description: str = "",
    to_reference: Callable[[Any], Any] = _identity,
    sizes: frozenset[str] | None = None,
    skip_reason: str = "",
    xla_flags: tuple[str, ...] = (),
    donate: tuple[int, ...] = (),
) -> Backend:
    """A backend that runs one AOT-compiled JAX executable per call.

    Args:
        name: CLI name.
        strategy: the loop organisation the executable represents.
        compile: ``compile(inputs, size) -> Compiled``: untimed placement + compilation.
        description: one line for listings and reports.
        to_reference: untimed conversion of the output back to the reference layout.
        sizes: size names the backend runs at (``None``: all).
        skip_reason: shown for the other sizes.
        xla_flags: XLA flags its worker starts with (see `scanbench.api.Backend`).
        donate: positions in ``Compiled.args`` the executable donates (compiled with
            the same ``donate_argnums``, checked in prepare). Before every call, untimed
            (``Backend.setup``), they are copied afresh from the prepared values, and
            the copies the previous call got must have been deleted by it, else the
            cell fails (`scanbench.donation.DonationError`); the copies XLA still made
            are counted from the HLO (`scanbench.probes.aliasing`).
    """
    donate = tuple(donate)
    return Backend(
        name=name,
        strategy=strategy,
        engine="jax",
        prepare=_donating(name, compile, donate),
        run=returns_ready(_call_compiled),
        description=description,
        to_reference=to_reference,
        sizes=sizes,
        skip_reason=skip_reason,
        executables=lambda prepared: {name: (prepared.executable, 1)},
        xla_flags=xla_flags,
        setup=_refresh_donated if donate else None,
        donate=donate,
    )


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
    xla_flags: tuple[str, ...] = (),
) -> Backend:
    """A `compiled_backend` of ``fn(inputs)``: inputs placed on the default device,
    ``jax.jit(fn).lower(args).compile()`` in the untimed prepare. The arguments not
    listed here are as in `compiled_backend`.

    Args:
        fn: a pure function of the (laid-out) input pytree.
        layout: untimed host-side change of layout before device placement (e.g. to
            time-major); it models data that already lives in that layout.
    """

    def compile(inputs: Any, size: Size) -> Compiled:
        import jax

        args = jax.device_put(layout(inputs))
        return Compiled(jax.jit(fn).lower(args).compile(), (args,))

    return compiled_backend(
        name,
        strategy,
        compile,
        description=description,
        to_reference=to_reference,
        sizes=sizes,
        skip_reason=skip_reason,
        xla_flags=xla_flags,
    )


def loop_backend(
    name: str,
    strategy: Strategy,
    prepare: Callable[[Any, Size], Any],
    run: Callable[[Any], Any],
    *,
    engine: str = "jax",
    description: str = "",
    to_reference: Callable[[Any], Any] = _identity,
    executables: Callable[[Any], Mapping[str, tuple[Any, int]]] | None = None,
    estimate: Callable[[Any, Size], Mapping[str, float]] | None = None,
    sizes: frozenset[str] | None = None,
    skip_reason: str = "",
    reducible_to: int | None = None,
    setup: Callable[[Any], Any] | None = None,
    checked: bool = True,
    donate: tuple[int, ...] = (),
    parallel: bool = False,
) -> Backend:
    """A host-driven loop: ``run(prepared)`` calls jitted functions (or another library)
    from Python; it is wrapped to return only when its whole output is ready. The
    arguments not listed here are as in `compiled_backend`.

    Args:
        executables: ``executables(prepared) -> {name: (compiled, calls_per_run)}`` for
            the static HLO estimate.
        estimate: ``estimate(inputs, size) -> {"estimated_s": ...}`` for the sizes it
            does not run at (see `scanbench.api.Backend`).
        reducible_to: measured on this many units of the scenario's ``count_along`` and
            scaled when a whole call would exceed the time budget (`scanbench.api.Backend`).
        setup: ``setup(prepared)`` untimed before every call (a stateful function).
        checked: False: timed without comparing the output with the reference.
        donate: the positions of the arguments ``run`` donates (`scanbench.api.Backend`);
            ``setup`` must hand each call fresh ones (`scanbench.donation.Donated`).
        parallel: the loop's work uses every core (a Numba ``prange`` kernel): compared
            with every core's bound and rate (`scanbench.api.Backend.parallel`).
    """
    return Backend(
        name=name,
        strategy=strategy,
        engine=engine,
        prepare=prepare,
        run=returns_ready(run),
        description=description,
        to_reference=to_reference,
        sizes=sizes,
        skip_reason=skip_reason,
        executables=executables,
        estimate=estimate,
        reducible_to=reducible_to,
        setup=setup,
        checked=checked,
        donate=tuple(donate),
        parallel=parallel,
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
    check: Callable[[Any, Any], float] | None = None,
    parallel: bool = False,
) -> Backend:
    """A backend that runs ``fn(inputs)`` on the host (NumPy, SciPy, Numba). The
    arguments not listed here are as in `jax_backend`.

    Args:
        warm_inputs: if given, ``fn(warm_inputs(laid_out_inputs))`` is called once in
            ``prepare``: tiny inputs of the same types, so a Numba function is compiled
            for them without running the full workload.
        check: its own check instead of the scenario's (`scanbench.api.Backend.check`).
        parallel: ``fn`` uses every core (Numba ``parallel=True``): compared with the
            all-cores memory bound.
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
        run=returns_ready(fn),
        description=description,
        to_reference=to_reference,
        sizes=sizes,
        skip_reason=skip_reason,
        check=check,
        parallel=parallel,
    )

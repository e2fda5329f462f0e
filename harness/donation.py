"""Donated arguments: a fresh input for every call, and a check that XLA took it.

A jitted function compiled with ``donate_argnums`` may write its output into the buffer of
a donated argument instead of allocating (and, for a loop carry, filling) a new one; the
argument's buffer is then deleted by the call. Timed again and again, such a function needs
a fresh argument before every call, built outside the timed region (as ``setup=`` rebuilds
the state of a stateful function). `Donated` holds the arguments of one backend: the
pristine values given in prepare (never passed to a call, so they stay valid), and the
copies handed to the next call. `Donated.refresh`, run untimed before every call, first
checks that the copies handed to the previous call were deleted (XLA took them: the
donation happened), then copies the pristine values again. A donated buffer that survives
a call fails the cell with `DonationError`, naming the argument: jax dropped the donation
("Some donated buffers were not usable": no output of that shape and dtype) or the
platform does not implement it, and the timed calls then measured no donation.

The copies XLA still inserts *with* a donation (an aliased parameter that is read after
the output is written into it) are counted statically from the optimized HLO by
`scanbench.probes.aliasing`.

Example:
    >>> import jax, jax.numpy as jnp
    >>> double = jax.jit(lambda x: 2 * x, donate_argnums=0)
    >>> held = Donated((jnp.arange(4.0),), donate=(0,), name="double")
    >>> held.refresh()
    >>> output = double(*held.call_args())
    >>> held.refresh()  # the previous copy was deleted by the call: a new one is made
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .errors import HarnessError, InputError


class DonationError(HarnessError):
    """A declared donated argument was not taken by the call (its buffer survived)."""


def _copy(value: Any) -> Any:
    """A device copy of every array leaf of ``value`` (same sharding): a buffer of its own."""
    import jax

    return jax.tree.map(lambda leaf: leaf.copy() if hasattr(leaf, "copy") else leaf, value)


def _ready(value: Any) -> Any:
    """``value`` once every copy in it is made: a copy is queued like any JAX call, and
    the next call, which reads it, would otherwise wait for it inside its timed region."""
    import jax

    return jax.block_until_ready(value)


def _leaves(value: Any) -> list[Any]:
    import jax

    return [leaf for leaf in jax.tree.leaves(value) if hasattr(leaf, "is_deleted")]


class Donated:
    """The positional arguments of a backend's call, those at ``donate`` rebuilt before
    every call (see the module doc).

    Args:
        args: the arguments as prepared; donated positions must hold JAX arrays (or
            pytrees of them) already on their device.
        donate: the positions of the donated arguments.
        name: the backend's name, for messages.
    """

    def __init__(self, args: Sequence[Any], donate: Sequence[int], name: str):
        self.args, self.donate, self.name = tuple(args), tuple(donate), name
        for position in self.donate:
            if not isinstance(position, int) or not 0 <= position < len(self.args):
                raise InputError(
                    f"backend {name!r}: donated argument {position!r} is not a position "
                    f"of its {len(self.args)} arguments (0..{len(self.args) - 1})"
                )
            if not _leaves(self.args[position]):
                raise InputError(
                    f"backend {name!r}: donated argument {position} holds no JAX array "
                    "(place it on the device in prepare: jax.device_put)"
                )
        self._handed: dict[int, Any] = {}  # the copies made for the next call
        self._passed = False  # call_args handed them to a call since they were made
        self.calls = 0  # calls whose donation was checked
        self.refresh()

    def refresh(self) -> None:
        """Check that the last call's donated copies were deleted, then copy again.
        Untimed: every timing path runs it before each call (``Backend.setup``)."""
        for position, value in self._handed.items() if self._passed else ():
            alive = [leaf for leaf in _leaves(value) if not leaf.is_deleted()]
            if alive:
                raise DonationError(
                    f"backend {self.name!r}: argument {position} is declared donated, but "
                    f"its buffer ({alive[0].shape} {alive[0].dtype}) still exists after "
                    "the call: XLA did not take it (jax warns 'Some donated buffers were "
                    "not usable' when no output has its shape and dtype), so the timed "
                    "calls measured no donation; compile with donate_argnums matching "
                    "an output, or declare no donation"
                )
        if self._passed:
            self.calls += 1
        handed = {position: _copy(self.args[position]) for position in self.donate}
        self._handed = _ready(handed)  # copied now, not inside the next (timed) call
        self._passed = False

    def call_args(self) -> tuple[Any, ...]:
        """The arguments of the next call: the fresh copies at the donated positions.
        Without a `refresh` in between, a second call gets the same (deleted) copies and
        jax refuses it: a timing path that skips ``setup`` fails loudly."""
        self._passed = True
        return tuple(self._handed.get(i, value) for i, value in enumerate(self.args))


def _leaf_ranges(args: Sequence[Any]) -> list[range]:
    """The flat leaf indices of each positional argument (how jax numbers donations)."""
    import jax

    ranges, start = [], 0
    for arg in args:
        count = len(jax.tree.leaves(arg))
        ranges.append(range(start, start + count))
        start += count
    return ranges


def check_declared(name: str, executable: Any, args: Sequence[Any], donate: Sequence[int]) -> None:
    """Raise `InputError` unless ``executable`` (``jax.jit(...).lower(*args).compile()``)
    donates exactly the arguments at ``donate`` (none: none). jax numbers its donations by
    flattened leaf; ``donate`` by positional argument. An executable without
    ``donate_argnums`` (not a jax one) passes."""
    leaves = getattr(executable, "donate_argnums", None)
    if leaves is None:
        return
    ranges = _leaf_ranges(args)
    wanted = {leaf for p in donate if 0 <= p < len(ranges) for leaf in ranges[p]}
    if set(leaves) == wanted:
        return
    compiled = tuple(p for p, leaf_range in enumerate(ranges) if set(leaf_range) & set(leaves))
    raise InputError(
        f"backend {name!r} declares donate={tuple(donate)}, but its executable was compiled "
        f"with donate_argnums={compiled}; make the two the same (a donated argument needs a "
        "fresh copy before every call: declare it with donate=)"
    )

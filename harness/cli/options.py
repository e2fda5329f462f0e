"""What several commands share: checked argparse types, the options that name cells, and
the one-line usage errors (exit 2)."""

from __future__ import annotations

import argparse
import math

from ..api import DTYPES, InputError
from ..sources import file_source

SEED_LIMIT = 2**32  # jax.random.key and NumPy's generators both accept 0 .. 2**32 - 1


def number(kind: type, name: str, low: float, high: float = math.inf, low_open: bool = True):
    """An argparse type: a finite ``kind`` in (low, high) (or [low, high) if not
    ``low_open``), with a message naming the option and the range."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{name} must be {'an integer' if kind is int else 'a number'}, got {text!r}"
            ) from None
        below = value <= low if low_open else value < low
        if not math.isfinite(value) or below or value >= high:
            bound = f"> {low:g}" if low_open else f">= {low:g}"
            if high != math.inf:
                bound += f" and < {int(high)}" if kind is int else f" and < {high:g}"
            finite = "" if kind is int else "finite and "
            raise argparse.ArgumentTypeError(f"{name} must be {finite}{bound}, got {text}")
        return value

    return parse


def positive(kind: type, name: str):
    """An argparse type: a finite ``kind`` > 0."""
    return number(kind, name, 0)


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (with where to look), exit code 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


class CommaAppend(argparse.Action):
    """A comma-list option that may also be repeated: ``--size smoke --size default`` is
    ``--size smoke,default`` (argparse would keep the last one, silently)."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = f"_given_{self.dest}"
        previous = getattr(namespace, self.dest)
        merged = f"{previous},{values}" if getattr(namespace, given, False) else values
        setattr(namespace, self.dest, merged)
        setattr(namespace, given, True)


class Once(argparse.Action):
    """An option of one value that refuses to be given twice (argparse would keep the
    last one, silently)."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = f"_given_{self.dest}"
        if getattr(namespace, given, False):
            parser.error(
                f"{option_string} given twice ({getattr(namespace, self.dest)!r}, then "
                f"{values!r}); this command takes one"
            )
        setattr(namespace, self.dest, values)
        setattr(namespace, given, True)


def cell_options(
    default_size: str, sizes_help: str, several_sizes: bool = False
) -> argparse.ArgumentParser:
    """The options that name cells, shared by run, profile and compare (a parent parser)."""
    cells = argparse.ArgumentParser(add_help=False)
    cells.add_argument(
        "--scenario",
        action="append",
        default=[],
        help="a scenario name or source (MODULE:ATTR, PATH.py:ATTR); repeatable",
    )
    cells.add_argument("--scenario-file", help="a Python file defining SCENARIO (your workload)")
    cells.add_argument("--backend", action="append", default=[], help="repeatable")
    size_action = CommaAppend if several_sizes else Once
    cells.add_argument("--size", default=default_size, action=size_action, help=sizes_help)
    cells.add_argument("--dtype", help=f"one of {', '.join(DTYPES)}; default per scenario")
    cells.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=V1,V2",
        help="run each backend that declares parameter NAME once per value (e.g. "
        "block=500,1000,2000); repeatable; `scanbench list` shows the parameters",
    )
    cells.add_argument(
        "--seed",
        type=number(int, "--seed", 0, SEED_LIMIT, low_open=False),
        default=0,
        help="input seed, 0 .. 2**32 - 1 (default 0)",
    )
    return cells


def comma_list(text: str, option: str, parse: type, what: str) -> list:
    """``a,b,c`` -> parsed values, each given once and valid (non-empty / >= 1)."""
    try:
        values = [parse(part.strip()) for part in text.split(",")]
    except ValueError:
        values = []
    valid = all(value >= 1 if parse is int else value for value in values)
    if not values or not valid or len(set(values)) != len(values):
        raise InputError(f"{option} must be {what} separated by commas, each once; got {text!r}")
    return values


def params(args: argparse.Namespace) -> dict[str, list[str]]:
    """``--param NAME=V1,V2`` options as ``{NAME: [V1, V2]}`` (values parsed by the
    backends that declare NAME)."""
    out: dict[str, list[str]] = {}
    for item in args.param:
        name, equals, values = item.partition("=")
        if not equals or not name.isidentifier() or name in out:
            raise InputError(
                f"--param {item!r}: expected NAME=V1,V2,... with each NAME given once, "
                "e.g. --param block=500,1000"
            )
        out[name] = comma_list(values, f"--param {name}", str, "values")
    return out


def scenarios(args: argparse.Namespace) -> list[str]:
    """The scenarios named: catalogue names or sources, and ``--scenario-file``'s."""
    return [*args.scenario, *([file_source(args.scenario_file)] if args.scenario_file else [])]

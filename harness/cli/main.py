"""``scanbench list | run | profile | report | gate | ab | flags | history | bisect``:
parse, call, write.

Each command is a module of this package with its parser (``add_parser``) beside its
handler (``run``), listed in `COMMANDS`: it parses its arguments, calls the harness
(`scanbench.execution.runner`, `scanbench.gate`, ...) and writes what it returns
(results, reports, text). Every error of scanbench's own (unknown names, bad values,
unreadable results files) is printed as one line on stderr with exit code 2, never as a
traceback.

The directory the command runs in comes first on the import path of this process and of
every worker it starts, as ``python -m`` does: a scenario file imports the user's own
packages from there (`scanbench.import_path`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ..api import HarnessError
from ..execution.interrupts import Interrupted
from ..import_path import use_import_root
from . import ab, bisect, flags, gate, history, listing, profile, report, run
from .options import Parser

COMMANDS = {
    "list": listing,
    "run": run,
    "profile": profile,
    "report": report,
    "gate": gate,
    "ab": ab,
    "flags": flags,
    "history": history,
    "bisect": bisect,
}
# commands renamed since an earlier release: the old name says the new one, exit 2
RENAMED = {"compare": "ab"}


def build_parser() -> argparse.ArgumentParser:
    """``scanbench`` with one subcommand per module of `COMMANDS`."""
    parser = Parser(
        prog="scanbench",
        description="Run JAX workloads through interchangeable evaluator backends and "
        "report time, throughput and where the time goes.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items():
        command.add_parser(commands).set_defaults(handler=command.run, command=name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words and words[0] in RENAMED:
        new = RENAMED[words[0]]
        print(
            f"scanbench: error: 'scanbench {words[0]}' is now 'scanbench {new}' "
            f"(see 'scanbench {new} --help')",
            file=sys.stderr,
        )
        return 2
    parser = build_parser()
    try:
        args = parser.parse_args(words)
    except SystemExit as stop:  # --help (0) or a usage error (2), already printed
        return int(stop.code or 0)
    use_import_root()  # a scenario file imports the user's code as `python -m` would
    try:
        return args.handler(args)
    except Interrupted as stop:  # what was finished is saved; the message says where
        print(str(stop), file=sys.stderr)
        return stop.exit_code
    except HarnessError as error:
        print(f"scanbench: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

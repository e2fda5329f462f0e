"""``scanbench list | run | profile | report | gate | ab | flags | history | bisect``:
parse, call, write.

Each command is a module of this package with its parser (``add_parser``) beside its
handler (``run``), listed in `COMMANDS`: it parses its arguments, calls the harness
(`scanbench.execution.runner`, `scanbench.gate`, ...) and writes what it returns
(results, reports, text). Every error of scanbench's own (unknown names, bad values,
unreadable results files) is printed as one line on stderr with exit code 2, never as a
traceback. Anything else that escapes a command is a crash (a bug): its traceback, then
one line naming it, and exit code `CRASHED` (70), so that a crash never reads as a
verdict (1: a failed cell, a regression) or as a usage error (2). Everything a command
prints goes through `scanbench.credentials.redacted_output`: no credential in a log.

Exit codes (``docs/cli.md``): 0 done; 1 a failed cell, a regression, a run not added;
2 a usage or input error; 3 ``bisect`` only: not pinned down; 70 a crash (``EX_SOFTWARE``
of BSD's sysexits.h, "an internal software error"); 130 and 143 interrupted by SIGINT
and SIGTERM (what was finished is saved).

The directory the command runs in is not on the import path of this process: a file
planted there (``tabulate.py`` in a folder of downloaded artefacts) must not run when
``scanbench report`` imports its libraries. It is put first, as ``python -m`` does, only
when a command loads a scenario of the user's (`scanbench.sources.load`): a scenario file
imports the user's own packages from there (`scanbench.import_path`).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence

from ..api import HarnessError
from ..credentials import redact, redacted_output
from ..execution.interrupts import Interrupted
from ..import_path import hiding_folder
from ..shown_text import for_terminal
from . import ab, bisect, flags, gate, gather, history, listing, profile, report, run
from .options import Parser

USAGE_ERROR = 2
CRASHED = 70  # sysexits.h EX_SOFTWARE: not 1 (a verdict), 2 (usage) or 3 (bisect's)

COMMANDS = {
    "list": listing,
    "run": run,
    "profile": profile,
    "report": report,
    "gather": gather,
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
    hiding = hiding_folder()
    if hiding is not None:
        print(
            f"scanbench: error: the folder {hiding} (a clone of scanbench?) hides the "
            "installed package: Python imports it from this directory as an empty "
            "package; run scanbench from another directory, or rename that folder",
            file=sys.stderr,
        )
        return USAGE_ERROR
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
    with redacted_output():  # every line the command prints, without credentials
        return _run(args)


def _shown(text: str) -> str:
    """A line for stderr: without credentials, and with the control characters of a
    message (a scenario's, a file name's) escaped, not obeyed by the terminal."""
    return for_terminal(redact(text))


def _run(args: argparse.Namespace) -> int:
    """The command's handler; its errors as one line (exit 2), a crash as its traceback
    and one line (exit 70)."""
    try:
        return args.handler(args)
    except Interrupted as stop:  # what was finished is saved; the message says where
        print(_shown(str(stop)), file=sys.stderr)
        return stop.exit_code
    except HarnessError as error:
        # one line, whatever the message holds: a scenario's text may hold line breaks,
        # and a line of its own starting with `::` is a command to GitHub's runner
        print(_shown(f"scanbench: error: {error}").replace("\n", "\\n"), file=sys.stderr)
        return USAGE_ERROR
    except Exception as error:  # a crash: shown whole, with a code of its own
        trace = "".join(traceback.format_exception(error))
        print(_shown(trace), file=sys.stderr, end="")
        print(
            _shown(
                f"scanbench: internal error: `scanbench {args.command}` crashed "
                f"({type(error).__name__}: {error}); exit code {CRASHED}: a bug in scanbench "
                "or in code it ran in this process, at the end of the traceback above"
            ),
            file=sys.stderr,
        )
        return CRASHED


if __name__ == "__main__":
    sys.exit(main())

"""In a worker: never outlive the run that started it.

On Linux a worker asks the kernel for a signal when its parent dies
(``prctl(PR_SET_PDEATHSIG)``, `die_with_parent`), so a SIGKILLed ``scanbench run`` takes
its workers with it; the worker then removes its temp folder (`exit_with_parent` handles
SIGTERM and also watches its parent). The worker makes that call itself, first thing after
its interpreter starts, then checks that its parent is still the process that started it
(a parent that died before the call is seen there). The parent is the runner, or the fork
server that forked the worker for it (`scanbench.execution.forkserver`), which dies with
the runner in the same way.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Mapping

PR_SET_PDEATHSIG = 1
PARENT_PID = "SCANBENCH_PARENT_PID"  # the runner's pid, for the worker's parent watch
DEATH_SIGNAL = "SCANBENCH_DEATH_SIGNAL"  # the signal the worker asks for when it dies


def die_with_parent(environ: Mapping[str, str] = os.environ) -> bool:
    """In a worker: ask the kernel for ``$SCANBENCH_DEATH_SIGNAL`` when the process that
    started it dies (Linux ``prctl(PR_SET_PDEATHSIG)``; libc is the one already loaded,
    ``dlopen(NULL)``: no library search). False when not asked for or not on Linux."""
    wanted = environ.get(DEATH_SIGNAL)
    if not wanted or not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_PDEATHSIG, int(wanted), 0, 0, 0) == 0


def exit_with_parent(argv: list[str]) -> None:
    """In a worker (``argv`` ends with its output path in a ``scanbench-*`` temp folder):
    remove that folder and exit when the parent asks (SIGTERM: a Ctrl-C, a timeout) or
    dies (SIGTERM from the kernel, see `die_with_parent`, or SIGCONT for a worker that
    may be stopped; a watchdog thread notices being re-parented, comparing with the
    runner's pid it was given). Called before the worker's heavy imports, so that a SIGTERM
    during them cleans up too; it imports nothing heavy itself.

    First, whatever ``argv`` is, the worker asks for its death signal (`die_with_parent`)
    and, if the run that started it is already gone (it died before the request reached
    the kernel), exits."""
    asked = die_with_parent()
    parent = int(os.environ.get(PARENT_PID) or os.getppid())
    folder = os.path.dirname(os.path.abspath(argv[-1])) if argv and argv[-1] else ""
    if not os.path.basename(folder).startswith("scanbench-"):
        if asked and os.getppid() != parent:  # the run died before the prctl call
            os._exit(143)
        return

    def clean_and_exit(*_: object) -> None:
        shutil.rmtree(folder, ignore_errors=True)
        os._exit(143)

    signal.signal(signal.SIGTERM, clean_and_exit)
    if os.getppid() != parent:  # the run died before this worker got here
        clean_and_exit()

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                clean_and_exit()

    threading.Thread(target=watch, name="scanbench-parent-watch", daemon=True).start()

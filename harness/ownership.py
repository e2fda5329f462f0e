"""Directories and files scanbench loads code or executables from: checked for owner and
mode before use.

A pickle, a serialized executable or a venv's interpreter runs code when it is loaded;
if anyone but this user can write the folder it comes from, anyone can choose that code.
So a folder named by an environment variable (``$SCANBENCH_REFERENCE_CACHE``,
``$SCANBENCH_CACHE``) or holding a pickled scenario is used only when it is a real
directory (not a symbolic link), owned by this user, and not writable by group or
others; a file loaded from it must be a regular file of this user's that no one else
can write. Anything else is refused with one line naming the path, what is wrong and the
fix (`scanbench.api.InputError`, exit 2).

The folders scanbench makes itself come from `tempfile.mkdtemp` (mode 0700, this
user's): they pass by construction, and are checked anyway where they are read back.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .api import InputError

SHARED_WRITE = stat.S_IWGRP | stat.S_IWOTH
PRIVATE = 0o077  # any access for group or others


def _problem(info: os.stat_result, directory: bool, private: bool) -> str | None:
    """What is wrong with a file or folder (its lstat), or None."""
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link"
    if directory and not stat.S_ISDIR(info.st_mode):
        return "is not a directory"
    if not directory and not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    if info.st_uid != os.getuid():
        return f"is owned by uid {info.st_uid}, not by this user (uid {os.getuid()})"
    mode = stat.S_IMODE(info.st_mode)
    if private and mode & PRIVATE:
        return f"has mode {mode:04o} (it must be private to this user: 0700)"
    if mode & SHARED_WRITE:
        return f"has mode {mode:04o} (group or others can write it)"
    return None


def check_owned(
    path: str | os.PathLike[str], what: str, directory: bool = True, private: bool = False
) -> Path:
    """``path`` when it is this user's, not a link, and writable by no one else (with
    ``private``: no access at all for group or others).

    Args:
        what: how the message names the path, e.g. ``"$SCANBENCH_CACHE"``.

    Raises:
        InputError: it is missing, a link, of another kind, another user's, or writable
            by others (one line naming the path, the problem and the fix).
    """
    target = Path(path)
    try:
        info = target.lstat()
    except OSError as error:
        raise InputError(f"{what} {str(target)!r}: {error.strerror}") from None
    problem = _problem(info, directory, private)
    if problem is not None:
        fix = "chmod go-rwx" if private else "chmod go-w"
        raise InputError(
            f"{what} {str(target)!r} {problem}; scanbench loads code from it only when it "
            f"is this user's and no one else can write it: `{fix}` it, or name another"
        )
    return target

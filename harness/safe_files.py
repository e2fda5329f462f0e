"""Files written so that nothing stored is ever half-written, replaced by surprise or read
through a link: the one place scanbench writes results, reports and history entries.

- `write_bytes_atomic` (and its text and JSON forms): a temporary file beside the target,
  fsync, rename; ``/dev/null`` is written in place, any other device, a FIFO, a socket or
  a directory is refused, and a symbolic link is followed only when no one else could
  have planted it (`output_path`).
- `output_path`: where a write to a path lands, its links checked.
- `outputs_apart`: outputs that are none of the inputs.
- `write_json_new`: a file that must not exist yet (history entries), linked into place.
- `not_regular`: why a path is not read as a plain file.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .api import InputError, StoreError
from .credentials import redact


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by None (JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> Path:
    """Write ``data`` as strict JSON (NaN and inf become null) via `write_text_atomic`."""
    return write_text_atomic(path, json.dumps(_finite(data), indent=1, allow_nan=False) + "\n")


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "a special file"


MAX_LINKS = 40  # as the kernel's path walk (ELOOP)
OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


def _planted(link: os.stat_result, folder: os.stat_result) -> bool:
    """Whether a symbolic link could have been planted by someone else: the kernel's
    ``protected_symlinks`` rule (a link in a sticky world-writable folder is followed only
    when it is the follower's or the folder owner's), applied to every folder a group or
    others can write, sticky or not."""
    return bool(folder.st_mode & OTHERS_WRITE) and link.st_uid not in (
        os.geteuid(),
        folder.st_uid,
    )


def output_path(path: str | os.PathLike[str]) -> Path:
    """Where writing ``path`` lands: ``os.path.realpath``, but every symbolic link met on
    the way (a folder of the path or the file itself) is followed only when it is this
    user's or its folder's owner's, or its folder is writable by no one else. A link
    another user could have planted in ``/tmp`` (``/tmp/report.md -> ~/.bashrc``) would
    otherwise make the write replace its target.

    Raises:
        StoreError: such a link (one line naming it, its owner and its folder), or a loop.
    """
    parts = list(reversed(Path(os.path.join(os.getcwd(), path)).parts))
    resolved = Path("/")
    links = 0
    while parts:
        name = parts.pop()
        if name in ("/", "", "."):
            continue
        if name == "..":
            resolved = resolved.parent
            continue
        candidate = resolved / name
        try:
            info = os.lstat(candidate)
        except OSError:  # missing (created by the write) or unreadable: the write says
            resolved = candidate
            continue
        if not stat.S_ISLNK(info.st_mode):
            resolved = candidate
            continue
        links += 1
        if links > MAX_LINKS:
            raise StoreError(f"refusing to write {path}: too many symbolic links ({candidate})")
        try:
            folder = os.stat(resolved)
        except OSError as error:
            raise StoreError(f"{path}: cannot write ({resolved}: {error.strerror})") from None
        if _planted(info, folder):
            raise StoreError(
                f"refusing to write {path}: {candidate} is a symbolic link of user "
                f"{info.st_uid} in {resolved}, a folder others can write, so it may have "
                "been planted; remove the link or write elsewhere"
            )
        target = os.readlink(candidate)
        if os.path.isabs(target):
            resolved = Path("/")
        parts.extend(reversed(Path(target).parts))
    return resolved


def _null(info: os.stat_result) -> bool:
    """Whether ``info`` is the null device (``--md /dev/null``: discard the report)."""
    try:
        null = os.stat(os.devnull)
    except OSError:
        return False
    return stat.S_ISCHR(info.st_mode) and info.st_rdev == null.st_rdev


def outputs_apart(outputs: dict[str, str | None], inputs: Sequence[str | os.PathLike[str]]) -> None:
    """Refuse, in one line, two outputs that are one file, or an output that is one of the
    inputs (a report written over the results it reads). ``outputs``: option -> path (None:
    not given). The same file is the same resolved path or, for files that exist, the same
    device and inode (a hard link)."""

    def identities(path: str | os.PathLike[str]) -> set[object]:
        keys: set[object] = {os.path.realpath(path)}
        with contextlib.suppress(OSError):
            info = os.stat(path)
            keys.add((info.st_dev, info.st_ino))
        return keys

    seen: dict[object, str] = {}
    for option, path in outputs.items():
        if not path:
            continue
        keys = identities(path)
        for key in keys:
            if key in seen:
                raise InputError(
                    f"{seen[key]} and {option} name the same file ({path}); give each its own path"
                )
        seen.update(dict.fromkeys(keys, option))
    for path in inputs:
        for key in identities(path):
            if key in seen:
                option = seen[key]
                raise InputError(
                    f"{option} {outputs[option]} is one of the input files ({path}); "
                    "give another path"
                )


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write text (UTF-8) to ``path`` as `write_bytes_atomic` does, without credentials
    (`scanbench.credentials.redact`: results, reports and summaries all come here); a lone
    surrogate (a file name that is not UTF-8, `os.fsdecode`) is written as its escape."""
    return write_bytes_atomic(path, redact(text).encode("utf-8", "backslashreplace"))


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write bytes to ``path`` without ever leaving it half-written or replacing a
    special file.

    - a new path or a regular file: a temp file beside it, fsync, then rename into place
      (a crash mid-write leaves the previous file untouched); a new file gets the
      user's umask, a replaced one keeps its mode;
    - a symlink: followed when no one else could have planted it (`output_path`); its
      target is replaced the same way, the link kept;
    - the null device (``--md /dev/null``): written in place;
    - a FIFO (a write would wait for a reader), any other device, a directory or a
      socket: refused (`StoreError`, one line).
    """
    target = output_path(path)
    try:
        info = target.stat()
    except FileNotFoundError:
        info = None
    except OSError as error:
        raise StoreError(f"{path}: cannot write ({error.strerror})") from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        if _null(info):
            try:
                with open(target, "wb") as handle:
                    handle.write(data)
            except OSError as error:
                raise StoreError(f"{path}: cannot write ({error.strerror})") from None
            return target
        raise StoreError(
            f"refusing to write {path}: it is {_kind(info.st_mode)}, not a regular file; "
            "give a file path (or /dev/null to discard it)"
        )
    mode = stat.S_IMODE(info.st_mode) if info is not None else 0o666 & ~_umask()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as error:
        raise StoreError(f"{path}: cannot write ({error.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException as error:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise StoreError(f"{path}: cannot write ({error.strerror})") from None
        raise
    return target


def write_json_new(path: Path, data: Any) -> bool:
    """Write JSON to ``path`` only if nothing is there: a complete temporary file beside
    it, linked to the name (`link(2)` refuses an existing name of any kind: file, link,
    FIFO, device; where the file system has no hard links, renamed after a check). False
    when the name was taken."""
    text = redact(json.dumps(data, allow_nan=False)) + "\n"  # compact: read, not edited
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError:  # a file system without hard links: check, then rename
            if os.path.lexists(path):
                return False
            os.rename(tmp, path)
        return True
    finally:
        Path(tmp).unlink(missing_ok=True)


KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def not_regular(mode: int) -> str | None:
    """Why a file of this mode is not read (``not a regular file (a FIFO)``), or None."""
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in KINDS if test(mode)), "of an unknown kind")
    return f"not a regular file ({kind})"

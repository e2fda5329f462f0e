"""Files written so that nothing stored is ever half-written, replaced by surprise or read
through a link: the one place scanbench writes results, reports and history entries.

- `write_bytes_atomic` (and its text and JSON forms): a temporary file beside the target,
  fsync, rename; a device or FIFO is written in place, never replaced.
- `write_json_new`: a file that must not exist yet (history entries), linked into place.
- `not_regular`: why a path is not read as a plain file.
"""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from .api import StoreError


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


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write text (UTF-8) to ``path`` as `write_bytes_atomic` does."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write bytes to ``path`` without ever leaving it half-written or replacing a
    special file.

    - a new path or a regular file: a temp file beside it, fsync, then rename into place
      (a crash mid-write leaves the previous file untouched); a new file gets the
      user's umask, a replaced one keeps its mode;
    - a symlink: followed; its target is replaced the same way, the link kept;
    - a character device (``/dev/null``) or a FIFO: written in place, never replaced;
    - a directory, block device or socket: refused (`StoreError`, one line).
    """
    target = Path(os.path.realpath(path))  # follow symlinks: replace the target
    try:
        info = target.stat()
    except FileNotFoundError:
        info = None
    except OSError as error:
        raise StoreError(f"{path}: cannot write ({error.strerror})") from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        if stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode):
            try:
                with open(target, "wb") as handle:
                    handle.write(data)
            except OSError as error:
                raise StoreError(f"{path}: cannot write ({error.strerror})") from None
            return target
        raise StoreError(f"refusing to write {path}: it is {_kind(info.st_mode)}")
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
    text = json.dumps(data, allow_nan=False) + "\n"  # compact: entries are read, not edited
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

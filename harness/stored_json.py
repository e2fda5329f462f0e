"""Reading a stored JSON file (a results file, a shard, a history entry, a journal line):
every way its text can be bad is one `StoreError` naming the file, never a traceback.

`json.loads` fails in four ways besides `json.JSONDecodeError`: bytes that are not
UTF-8 (`UnicodeDecodeError`), nesting deeper than Python's recursion limit
(`RecursionError`), an integer longer than Python's digit limit for converting text
(`ValueError`, ``sys.get_int_max_str_digits``), and a file that cannot be read
(`OSError`). A file nested deeper than `MAX_DEPTH` is refused as well: it parses, but
every recursive walk over it later (redaction, reports) would hit the limit; no file
scanbench writes nests deeper than about ten.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from .errors import StoreError

MAX_DEPTH = 64  # scanbench's own files nest about ten deep


def _at(where: str) -> str:
    return f"{where}: " if where else ""


def decoded(data: bytes, where: str) -> str:
    """``data`` decoded as UTF-8.

    Raises:
        StoreError: ``"<where>: not UTF-8 (byte N: ...)"``.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise StoreError(
            f"{_at(where)}not UTF-8 (byte {error.start}: {error.reason}); not a file scanbench "
            "wrote, or a damaged one"
        ) from None


def parse_json(text: str | bytes, where: str) -> Any:
    """The JSON value of ``text`` (bytes are decoded as UTF-8); ``where`` (the file)
    starts each message, unless empty.

    Raises:
        StoreError: ``"<where>: not UTF-8 ..."``, ``"<where>: not valid JSON ..."``,
            ``"<where>: nested deeper than ..."`` or ``"<where>: a number ..."``.
    """
    if isinstance(text, bytes):
        text = decoded(text, where)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise StoreError(
            f"{_at(where)}not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})"
        ) from None
    except RecursionError:
        raise StoreError(f"{_at(where)}nested deeper than {MAX_DEPTH} levels") from None
    except ValueError:  # an integer past sys.get_int_max_str_digits()
        limit = sys.get_int_max_str_digits()
        raise StoreError(f"{_at(where)}an integer longer than {limit} digits") from None
    if _deeper_than(data, MAX_DEPTH):
        raise StoreError(f"{_at(where)}nested deeper than {MAX_DEPTH} levels")
    return data


def _deeper_than(data: Any, limit: int) -> bool:
    """Whether ``data`` nests lists and objects more than ``limit`` deep (no recursion)."""
    stack = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth >= limit:
                return True
            items = value.values() if isinstance(value, dict) else value
            stack.extend((item, depth + 1) for item in items if isinstance(item, dict | list))
    return False

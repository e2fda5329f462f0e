"""Text that anyone could have written, made safe to write and to show.

A scenario's exception message, a file name, a host name or a backend name reaches the
reports and the terminal as it was given. Three things in such a text broke them:

- a lone surrogate (what `os.fsdecode` makes of a file name that is not UTF-8:
  ``caf\\udce9.npy``) cannot be encoded as UTF-8: every writer crashed on it.
  `escaped_surrogates` writes it as its escape (``\\udce9``), as Python's own stderr does;
- a ``|`` or a line break ends a markdown table's cell or row: `table_cell` escapes the
  one (``\\|``) and writes the other as ``<br>``;
- a control character (``ESC [2J`` clears a screen, ``ESC ]0;...`` retitles a window,
  ``\\r`` writes over a line) is obeyed by a terminal: `for_terminal` writes each as its
  escape (``\\x1b``), keeping line breaks and tabs.

Example:
    >>> print(for_terminal("boom \\x1b[2J\\r" + "caf\\udce9"))
    boom \\x1b[2J\\rcaf\\udce9
    >>> print(table_cell("a | b\\nc"))
    a \\| b<br>c
"""

from __future__ import annotations

import re

SURROGATE = re.compile("[\ud800-\udfff]")
# C0 controls but line feed and tab, DEL, and the C1 controls (``\x9b`` is a CSI alone)
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
LINE_BREAK = re.compile(r"\r\n|\r|\n")


def escaped_surrogates(text: str) -> str:
    """``text`` with each lone surrogate written as its escape (``\\udce9``): encodable."""
    if not SURROGATE.search(text):
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def for_terminal(text: str) -> str:
    """``text`` as a terminal may show it: surrogates and control characters escaped
    (``\\x1b``), line breaks and tabs kept."""
    return CONTROL.sub(lambda match: ascii(match[0])[1:-1], escaped_surrogates(text))


def one_line(text: str) -> str:
    """``text`` within one markdown line (a list item): line breaks as ``<br>``."""
    return LINE_BREAK.sub("<br>", text)


def table_cell(text: str) -> str:
    """``text`` within one markdown table cell: ``|`` escaped, line breaks as ``<br>``."""
    return one_line(text.replace("|", "\\|"))

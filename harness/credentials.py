"""Credentials never stored: the one function every written text passes through.

A CI job's remote URL carries its token (``https://x-access-token:ghs_...@github.com/o/r``
on GitHub Actions, ``https://gitlab-ci-token:...@gitlab.com/o/r`` on GitLab CI), and an
error message, a worker's stderr or an argument can carry one too. Every text scanbench
writes (results files, journals, history entries, reports, the job summary, the lines it
prints on stderr) goes through `redact` first, and every results file is redacted again
when it is read, so that a report drawn from a file written before this rule holds
nothing secret either:

- a URL keeps its scheme, host, port and path; its user name and password are dropped
  (``https://user:token@host/o/r`` -> ``https://host/o/r``), except a bare ``git@``, the
  SSH convention that names no one; the value of each query or fragment parameter whose
  name says it is a secret (``token``, ``access_token``, ``private_token``, ``key``,
  ``sig``, ``password``, ``auth``, ``code``, ...) becomes ``REDACTED``;
- a token of a known shape is replaced wherever it stands (GitHub ``ghp_``, ``gho_``,
  ``ghu_``, ``ghs_``, ``ghr_``, ``github_pat_``; GitLab ``glpat-`` and its kin; Bitbucket
  and Atlassian ``ATBB``, ``ATCTT3``, ``ATATT3``), and so is the value of an
  ``Authorization: Basic|Bearer|token ...`` header.

`public_url` applies the URL rule to one URL, and also strips the user of an scp-like
remote (``user@host:path``) unless it is ``git``. `redacted_output` redacts everything a
command prints on stdout and stderr (the command line runs every command inside it).

Example:
    >>> public_url("https://x-access-token:ghs_abc@github.com/o/r.git")
    'https://github.com/o/r.git'
    >>> redact("fatal: unable to access 'https://oauth2:glpat-0123456789abcdefghij@gitlab.com/o/r/'")
    "fatal: unable to access 'https://gitlab.com/o/r/'"
"""

from __future__ import annotations

import contextlib
import re
import sys
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TextIO

from .shown_text import escaped_surrogates, for_terminal

REDACTED = "REDACTED"
SSH_USER = "git"  # ``git@github.com:o/r``: the SSH convention, not a secret

# a URL in free text: a scheme, ://, then anything up to a space, a quote or a bracket.
# The scheme is the longest tail of a run of scheme characters that starts with a letter,
# whatever stands before it (``x_https://user:token@host``, glued to a word, is a URL
# too). Written as ``[A-Za-z][A-Za-z0-9+.\-]*://...`` it is tried at every letter of a
# run (``a.a.a.a...``) and each try reads the run to its end: 80 KB took 3 s. Here a run
# is read once: only its first character may start a match (the lookbehind), the
# lookahead checks once that the run ends in ``://`` and a URL, and ``lead`` (kept as it
# is: digits, ``+``, ``.``, ``-``) is the part of the run before the scheme.
SCHEME_CHARACTER = r"[A-Za-z0-9+.\-]"
URL_CHARACTER = r"[^\s\"'<>`\\]"
URL = re.compile(
    rf"(?<!{SCHEME_CHARACTER})(?={SCHEME_CHARACTER}*://{URL_CHARACTER})"
    rf"(?P<lead>[0-9+.\-]*)"
    rf"(?P<url>[A-Za-z]{SCHEME_CHARACTER}*://{URL_CHARACTER}+)"
)
# an scp-like git remote: [user@]host:path (no scheme)
SCP = re.compile(r"^(?:(?P<user>[^@/:\s]+)@)?(?P<host>[\w.\-]+):(?P<path>(?!//).*)$")
# query and fragment parameters whose value is a secret, by their name
SECRET_NAME = re.compile(
    r"token|secret|passw|pwd|auth|key|sig|credential|session|code|private|jwt",
    re.IGNORECASE,
)
# a name starts a parameter (after ``&``, ``;`` or the leading ``=`` s); tried at every
# character instead, a 20 KB query without ``=`` took 4.6 s
PARAMETER = re.compile(r"(?<![^&;=])(?P<name>[^&;=]+)=(?P<value>[^&;]*)")
# tokens whose shape says what they are, wherever they stand
TOKENS = re.compile(
    r"\bgh[pousr]_[A-Za-z0-9]{20,255}\b"  # GitHub classic, OAuth, user, server, refresh
    r"|\bgithub_pat_[A-Za-z0-9_]{20,255}"  # GitHub fine-grained
    r"|\bgl(?:pat|ptt|dt|rt|cbt|imt|ft|soat|oas|agent)-[A-Za-z0-9_\-]{20,}"  # GitLab
    r"|\bAT(?:BB|CTT3|ATT3)[A-Za-z0-9_=.\-]{20,}"  # Bitbucket app/access, Atlassian API
)
AUTHORIZATION = re.compile(
    r"(?P<header>authorization:\s*(?:basic|bearer|token)\s+)[A-Za-z0-9+/=._~\-]+",
    re.IGNORECASE,
)
# what a text must contain for a token to be found there (a superset of TOKENS' prefixes):
# on a results file of 1.4 MB (docs/results/smoke.json) one search took 22 ms, TOKENS
# 100 ms and 16 substring tests, one per prefix, 61 ms
TOKEN_HINT = re.compile(r"g(?:h[pousr]_|ithub_pat_|l[a-z]{1,6}-)|AT(?:BB|CTT3|ATT3)")


def _parameters(text: str) -> str:
    """``a=1&token=x`` -> ``a=1&token=REDACTED``: secret-named values replaced."""

    def replace(match: re.Match[str]) -> str:
        if SECRET_NAME.search(urllib.parse.unquote_plus(match["name"])):
            return f"{match['name']}={REDACTED}"
        return match[0]

    return PARAMETER.sub(replace, text)


def _url(url: str) -> str:
    """One URL (with a scheme) without its credentials (see the module doc)."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # e.g. a malformed IPv6 host: keep nothing that could be a secret
        scheme, _, rest = url.partition("://")
        return f"{scheme}://{rest.rpartition('@')[2]}" if "@" in rest else url
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        netloc = f"{SSH_USER}@{hostport}" if userinfo == SSH_USER else hostport
    return urllib.parse.urlunsplit(
        (parts.scheme, netloc, parts.path, _parameters(parts.query), _parameters(parts.fragment))
    )


def redact(text: str) -> str:
    """``text`` with every credential the module doc lists removed or replaced."""
    if "://" in text:
        text = URL.sub(lambda match: match["lead"] + _url(match["url"]), text)
    if TOKEN_HINT.search(text):
        text = TOKENS.sub(REDACTED, text)
    if "authorization" in text.lower():
        text = AUTHORIZATION.sub(lambda match: match["header"] + REDACTED, text)
    return text


def public_url(url: str | None) -> str | None:
    """A remote URL as it may be stored: `redact` of a URL, and an scp-like
    ``user@host:path`` without its user (unless ``git``). None stays None."""
    if not url:
        return url
    url = url.strip()
    if "://" not in url:
        match = SCP.match(url)
        if match and match["user"] not in (None, SSH_USER):
            url = f"{match['host']}:{match['path']}"
    return redact(url)


class Redacting:
    """A text stream that passes what is written to it through `redact`, then ``shown``
    (everything else, ``flush``, ``isatty``, ``fileno``, ..., is the wrapped stream's)."""

    def __init__(self, stream: TextIO, shown: Callable[[str], str] = escaped_surrogates) -> None:
        self.stream = stream
        self.shown = shown

    def write(self, text: str) -> int:
        self.stream.write(self.shown(redact(text)))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextlib.contextmanager
def redacted_output() -> Iterator[None]:
    """Within the block, ``sys.stdout`` and ``sys.stderr`` are `Redacting` streams: what
    a command prints (its report, its progress lines, a traceback) holds no credential,
    no lone surrogate (each is escaped: stdout would raise on it) and, on stdout, no
    control character a terminal would obey (`scanbench.shown_text.for_terminal`; stderr
    carries the progress bar's own, and the lines scanbench writes there are escaped
    where they are made)."""
    before = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = Redacting(sys.stdout, for_terminal), Redacting(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = before

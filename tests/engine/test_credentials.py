"""Credentials never stored: `scanbench.credentials` on the token forms of the major CI
providers, and every place a text is written or printed going through it."""

from __future__ import annotations

import json
import re
import sys
import time
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scanbench import credentials
from scanbench.credentials import REDACTED, public_url, redact

GH_CLASSIC = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # 36 characters after ghp_
GH_SERVER = "ghs_" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp9Oo8"
GH_FINE = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQR"
GL_PAT = "glpat-xY9zAb8CdEf7GhIj6KlMn"
GL_JOB = "glcbt-64_Zy8Xw7Vu6Ts5Rq4Po3Nm2"
BB_APP = "ATBB" + "x7Kp2Lm9Qr4St6Uv8Wx0Yz1Ab3Cd5Ef7Gh9Ij"
AZURE_PAT = "4q6w2n3xk5vbm7z8c9a2s3d4f5g6h7j8k9l2p3o4i5u6y7t8r9e2"  # 52 base32 chars

SECRETS = [GH_CLASSIC, GH_SERVER, GH_FINE, GL_PAT, GL_JOB, BB_APP, AZURE_PAT, "hunter2", "s3cr3t"]

# (remote as a CI provider writes it, what is stored)
REMOTES = [
    # GitHub Actions (actions/checkout with persist-credentials, or a hand-made URL)
    (
        f"https://x-access-token:{GH_SERVER}@github.com/owner/repo.git",
        "https://github.com/owner/repo.git",
    ),
    (f"https://{GH_CLASSIC}@github.com/owner/repo", "https://github.com/owner/repo"),
    (f"https://{GH_FINE}:x-oauth-basic@github.com/o/r.git", "https://github.com/o/r.git"),
    (f"https://user:{GH_FINE}@github.com/o/r.git", "https://github.com/o/r.git"),
    # GitLab CI, and a personal or project access token
    (
        f"https://gitlab-ci-token:{GL_JOB}@gitlab.com/group/sub/repo.git",
        "https://gitlab.com/group/sub/repo.git",
    ),
    (f"https://oauth2:{GL_PAT}@gitlab.example.org/g/r.git", "https://gitlab.example.org/g/r.git"),
    # Bitbucket Pipelines
    (
        f"https://x-token-auth:{BB_APP}@bitbucket.org/team/repo.git",
        "https://bitbucket.org/team/repo.git",
    ),
    # Azure DevOps: user:PAT, and the PAT alone
    (
        f"https://org:{AZURE_PAT}@dev.azure.com/org/project/_git/repo",
        "https://dev.azure.com/org/project/_git/repo",
    ),
    (f"https://{AZURE_PAT}@dev.azure.com/org/p/_git/r", "https://dev.azure.com/org/p/_git/r"),
    # plain user:password, with a port, and over ssh://
    ("https://alice:hunter2@git.example.com:8443/a/b.git", "https://git.example.com:8443/a/b.git"),
    ("ssh://alice:s3cr3t@git.example.com/a/b.git", "ssh://git.example.com/a/b.git"),
    # a password with an @ in it
    ("https://alice:hun@ter2@git.example.com/a/b.git", "https://git.example.com/a/b.git"),
    # tokens in the query string and the fragment
    (
        f"https://gitlab.com/api/v4/projects/1?private_token={GL_PAT}&ref=main",
        f"https://gitlab.com/api/v4/projects/1?private_token={REDACTED}&ref=main",
    ),
    (
        "https://host.example/o/r.git?access_token=s3cr3t",
        f"https://host.example/o/r.git?access_token={REDACTED}",
    ),
    (
        "https://blob.example/c/x?sv=2024&sig=s3cr3t%2Bx",
        f"https://blob.example/c/x?sv=2024&sig={REDACTED}",
    ),
    (
        "https://host.example/cb#access_token=s3cr3t",
        f"https://host.example/cb#access_token={REDACTED}",
    ),
    # what is no secret stays
    ("git@github.com:owner/repo.git", "git@github.com:owner/repo.git"),
    ("ssh://git@github.com/owner/repo.git", "ssh://git@github.com/owner/repo.git"),
    ("https://github.com/owner/repo.git", "https://github.com/owner/repo.git"),
    ("/home/me/src/repo", "/home/me/src/repo"),
    # an scp-like remote with another user: the user is dropped
    ("alice@git.example.com:a/b.git", "git.example.com:a/b.git"),
]


@pytest.mark.parametrize(("remote", "stored"), REMOTES)
def test_public_url_strips_every_providers_credentials(remote, stored):
    assert public_url(remote) == stored
    for secret in SECRETS:
        assert secret not in public_url(remote)


def test_public_url_keeps_none_and_empty():
    assert public_url(None) is None
    assert public_url("") == ""


@pytest.mark.parametrize(
    "token", [GH_CLASSIC, GH_SERVER, GH_FINE, GL_PAT, GL_JOB, BB_APP], ids=str.__len__
)
def test_a_bare_token_of_a_known_shape_is_replaced_anywhere(token):
    line = f"export GH_TOKEN={token}; echo done"
    assert redact(line) == f"export GH_TOKEN={REDACTED}; echo done"


def test_an_authorization_header_is_replaced():
    line = "git -c http.extraheader='AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hz' fetch"
    assert redact(line) == f"git -c http.extraheader='AUTHORIZATION: basic {REDACTED}' fetch"
    assert redact("Authorization: Bearer abc.def-ghi") == f"Authorization: Bearer {REDACTED}"


def test_urls_inside_text_and_json_are_stripped():
    text = (
        f"fatal: unable to access 'https://x-access-token:{GH_SERVER}@github.com/o/r/': "
        "The requested URL returned error: 403"
    )
    assert redact(text) == (
        "fatal: unable to access 'https://github.com/o/r/': The requested URL returned error: 403"
    )
    data = {"git": {"remote": f"https://oauth2:{GL_PAT}@gitlab.com/g/r.git"}, "n": [1.5, 2]}
    cleaned = json.loads(redact(json.dumps(data)))
    assert cleaned == {"git": {"remote": "https://gitlab.com/g/r.git"}, "n": [1.5, 2]}


@pytest.mark.parametrize("before", ["x_", "1", "é", "token=abc_", "ab1.", "-"])
def test_a_url_glued_to_what_stands_before_it_loses_its_credentials(before):
    assert redact(f"{before}https://u:{GH_CLASSIC}@h.example/o") == f"{before}https://h.example/o"


def test_text_without_credentials_is_returned_unchanged():
    text = 'see https://github.com/o/r/commit/abc?plain=1 and "a@b" ghost glue ATen'
    assert redact(text) == text


@given(st.text())
def test_redact_is_idempotent_and_keeps_clean_text(text):
    once = redact(text)
    assert redact(once) == once
    if "://" not in text and "uthorization" not in text.lower():
        assert once == text or REDACTED in once


# ---------------------------------------------------------------- where it is applied


def test_the_environment_stores_the_remote_without_its_token(tmp_path):
    import subprocess

    from scanbench.environment import git_facts

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x")
    git("remote", "add", "origin", f"https://x-access-token:{GH_SERVER}@github.com/o/r.git")
    facts = git_facts(tmp_path)
    assert facts is not None
    assert facts["remote"] == "https://github.com/o/r.git"


def test_every_written_text_and_every_read_results_file_is_redacted(tmp_path):
    from scanbench.invocation import CommandLine, Invocation
    from scanbench.results import Run, load_run, write_run
    from scanbench.safe_files import write_text_atomic

    leaky = f"https://x-access-token:{GH_SERVER}@github.com/o/r.git"
    git = {"commit": "a" * 40, "remote": leaky}
    invocation = Invocation(origin=CommandLine((leaky,)))
    run = Run({"git": git, "note": f"token {GL_PAT}"}, invocation, ())
    path = write_run(tmp_path / "run.json", run)
    text = path.read_text()
    assert GH_SERVER not in text and GL_PAT not in text
    assert "https://github.com/o/r.git" in text
    # a file written before the rule (by hand here) is redacted when read
    old = tmp_path / "old.json"
    old.write_text(json.dumps(run.to_json()))
    assert load_run(old).environment["git"]["remote"] == "https://github.com/o/r.git"
    report = write_text_atomic(tmp_path / "report.md", f"remote: {leaky}\n")
    assert report.read_text() == "remote: https://github.com/o/r.git\n"


def test_the_journal_and_the_progress_lines_are_redacted(tmp_path, capsys):
    from scanbench.execution.journal import Journal, read_journal
    from scanbench.execution.launcher import emit

    leaky = f"https://oauth2:{GL_PAT}@gitlab.com/g/r.git"
    path = tmp_path / "out.json.journal"
    with Journal.create(path, {"remote": leaky}, {"argv": [leaky]}):
        pass
    assert GL_PAT not in path.read_text()
    environment, _, _ = read_journal(path)
    assert environment["remote"] == "https://gitlab.com/g/r.git"
    emit(f"cloning {leaky}")
    assert capsys.readouterr().err == "cloning https://gitlab.com/g/r.git\n"


def test_the_job_summary_is_redacted(tmp_path):
    from scanbench.gate.github import publish

    summary = tmp_path / "summary.md"
    publish(f"token {GH_CLASSIC}", [], {"GITHUB_STEP_SUMMARY": str(summary)})
    assert GH_CLASSIC not in summary.read_text()


def test_a_history_entry_stores_the_remote_without_its_token(tmp_path):
    from scanbench.history.archive import commit_of

    sha = "a" * 40
    commit, _ = commit_of(
        {"git": {"commit": sha, "remote": f"https://x-token-auth:{BB_APP}@bitbucket.org/t/r"}}
    )
    assert commit.remote == "https://bitbucket.org/t/r"


def test_an_error_line_of_the_command_line_is_redacted(capsys, monkeypatch):
    from scanbench.api import InputError
    from scanbench.cli import main as cli

    def fail(args):
        raise InputError(f"git fetch https://user:{GH_CLASSIC}@github.com/o/r failed")

    monkeypatch.setattr(cli.listing, "run", fail)
    assert cli.main(["list"]) == 2
    err = capsys.readouterr().err
    assert GH_CLASSIC not in err and "https://github.com/o/r failed" in err


def test_what_a_command_prints_is_redacted(capsys, monkeypatch):
    from scanbench.cli import main as cli

    def chatty(args):
        print(f"report of https://user:{GH_CLASSIC}@github.com/o/r")
        sys.stderr.write(f"progress {GL_PAT}\n")
        return 0

    monkeypatch.setattr(cli.listing, "run", chatty)
    assert cli.main(["list"]) == 0
    out, err = capsys.readouterr()
    assert out == "report of https://github.com/o/r\n"
    assert err == f"progress {REDACTED}\n"
    from scanbench.credentials import Redacting

    assert not isinstance(sys.stdout, Redacting)  # restored when the command returns


# ---------------------------------------------------------------- hostile texts, in time

# The patterns as they were before they were made linear: the reference for what must be
# redacted (each tries every start of a run and reads it to its end, fine on short texts);
# the URL without the word boundary before its scheme, which kept the credentials of a
# URL glued to a word (``x_https://user:token@host``)
OLD_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>`\\]+")
OLD_PARAMETER = re.compile(r"(?P<name>[^&;=]+)=(?P<value>[^&;]*)")


def old_redact(text: str) -> str:
    with mock.patch.object(credentials, "PARAMETER", OLD_PARAMETER):
        if "://" in text:
            text = OLD_URL.sub(lambda match: credentials._url(match[0]), text)
    if credentials.TOKEN_HINT.search(text):
        text = credentials.TOKENS.sub(REDACTED, text)
    if "authorization" in text.lower():
        text = credentials.AUTHORIZATION.sub(lambda match: match["header"] + REDACTED, text)
    return text


# the characters and pieces the URL and parameter patterns turn on
PIECES = [
    *"aZ19.+-_é:/@?&;=# \"'\\[]%\n",
    "://",
    "https",
    "git",
    "token",
    "user:pw@",
    "x.y",
    "=s3cr3t",
    "authorization: bearer ",
]
PLANTED = "Q7pW9xK2mZ"  # no piece of a hostile text can make it or split it
HOSTILE_TEXT = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)


@settings(max_examples=400)
@given(HOSTILE_TEXT)
def test_what_was_redacted_is_redacted_the_same_way(text):
    assert redact(text) == old_redact(text)


@given(st.text(max_size=60))
def test_any_text_is_redacted_as_before(text):
    assert redact(text) == old_redact(text)


@given(
    before=HOSTILE_TEXT,
    scheme=st.sampled_from(["https", "ssh", "git+ssh", "s3", "x-y.z"]),
    user=st.sampled_from(["", "x-access-token:", "oauth2:", "a.b:"]),
    after=HOSTILE_TEXT,
)
def test_a_password_in_a_url_is_removed_whatever_surrounds_it(before, scheme, user, after):
    text = f"{before} {scheme}://{user}{PLANTED}@host.example/o/r {after}"
    assert PLANTED not in redact(text)
    assert PLANTED not in redact(text.replace("@host", "@host.example/?token=" + PLANTED))


# texts that made a pattern read the same run again from each of its characters, each
# with a planted secret that must still go
ADVERSARIAL = {
    "a dotted run before ://": lambda n: "a." * (n // 2) + f" x://u:{PLANTED}@y",
    "a dotted hostname beside a URL": lambda n: (
        '"host": "' + "a." * (n // 2) + f'", "u": "s://u:{PLANTED}@h"'
    ),
    "a query without =": lambda n: "https://h/?" + "a" * n + f"&token={PLANTED}",
    "a fragment without =": lambda n: "https://h/#" + "a" * n + f"&token={PLANTED}",
}


def _fastest(function, text, repeats=3):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function(text)
        times.append(time.perf_counter() - start)
    return min(times)


@pytest.mark.parametrize("shape", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_a_hostile_field_of_2_mb_is_redacted_in_linear_time(shape):
    # ten times the text takes about ten times as long (a quadratic pattern: a hundred
    # times; 20 KB of the query took 4.6 s before); a ratio, not a wall-clock bound
    small, large = shape(200_000), shape(2_000_000)
    assert PLANTED not in redact(large)
    ratio = _fastest(redact, large) / _fastest(redact, small)
    assert ratio < 30, f"10x the text took {ratio:.0f}x the time"

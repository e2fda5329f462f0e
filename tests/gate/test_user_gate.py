"""The gate in a user's own repository and CI (slow: each comparison starts JAX workers).

`scanbench gate --against REV` compares revisions of the repository it runs in, each side
importing its own tree's package and scenario file; the GitHub Action's steps (action.yml)
are run as a runner would, with the GITHUB_* variables and files pointed at temporary
ones; the workflow and action files pass actionlint and zizmor.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support import user_repo
from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
pytestmark = pytest.mark.slow


def _environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SCANBENCH_"))}
    env.pop("PYTHONPATH", None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return {**env, **extra}


def gate(repo: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "scanbench.cli", "gate", "--gates", "bench/gates.toml"]
    return subprocess.run(
        [*command, *args], cwd=repo, env=_environment(**env), capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip


@pytest.fixture(scope="module")
def pull_request(tmp_path_factory) -> Path:
    """``main``: the scan; branch ``pr``: the Python loop (a regression), then a commit
    that changes nothing measurable; ``origin`` holds ``main`` (the PR's base)."""
    where = tmp_path_factory.mktemp("user")
    repo = user_repo.make(where / "repo")
    origin = where / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(origin)], check=True)
    user_repo.git(repo, "remote", "add", "origin", str(origin))
    user_repo.git(repo, "checkout", "-q", "-b", "pr")
    user_repo.commit(repo, user_repo.SLOW, "smooth in a Python loop")
    user_repo.commit(repo, user_repo.SLOW + "\n# reworded\n", "reword a comment")
    return repo


def test_a_regression_of_the_users_code_fails_and_is_explained(pull_request):
    done = gate(pull_request, "--against", "main")
    assert done.returncode == 1, done.stderr
    assert "smoothing/smooth/smoke" in done.stdout and "FAILED" in done.stdout
    assert re.search(r"head adds \d+ dispatches per call \(1 -> \d+\)", done.stdout), done.stdout


def test_a_commit_that_changes_nothing_measurable_passes(pull_request):
    done = gate(pull_request, "--against", "HEAD~1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no count, HLO or environment difference" in done.stdout


def test_each_side_measures_its_own_tree_when_the_package_is_also_on_the_path(
    pull_request, tmp_path
):
    """A copy of the head's (slow) package earlier on the path than site-packages, as an
    installed copy would be: each side still imports its own tree's, first."""
    installed = tmp_path / "installed"
    shutil.copytree(pull_request / "mylib", installed / "mylib")
    done = gate(pull_request, "--against", "main", PYTHONPATH=str(installed))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "head adds" in done.stdout


def test_a_side_that_would_import_the_other_trees_code_says_so(tmp_path):
    """A src layout with an absolute PYTHONPATH into the head's tree: the baseline side
    would measure the head's code. It is refused in one line naming the module; the
    relative entry each side reads in its own tree works."""
    repo = user_repo.make(tmp_path / "repo", package="src/mylib")
    user_repo.commit(repo, user_repo.TOUCHED, "reword", package="src/mylib")
    done = gate(repo, "--against", "HEAD~1", PYTHONPATH=str(repo / "src"))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "imported mylib from" in line and "in the other side's tree" in line
    assert "PYTHONPATH=src" in line
    assert gate(repo, "--against", "HEAD~1", PYTHONPATH="src").returncode == 0


@pytest.mark.parametrize(
    ("gates", "says"),
    [
        (
            '[settings]\ncount_size = "nosuchsize"\n' + user_repo.GATES.split("\n\n", 1)[1],
            "unknown size 'nosuchsize'",
        ),
        (
            '[[baseline]]\nscenario = "nosuch"\nbackend = "smooth"\nsize = "smoke"\n',
            "unknown scenario 'nosuch'",
        ),
        ('[settings]\nscenarios = ["bench/scenario.py:SCENARIO"]\n', "does not exist"),
        ("", "decides nothing"),
    ],
)
def test_a_misconfigured_gate_never_passes(tmp_path, gates, says):
    repo = user_repo.make(tmp_path / "repo")
    (repo / "bench" / "gates.toml").write_text(gates)
    done = gate(repo)
    assert done.returncode == 2, done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert says in line


# ----- the GitHub Action, step by step, as a runner runs it -----

EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}", re.S)
NAME = re.compile(r"\b(inputs|github|runner|steps)\.([\w.-]+)")


def _value(context: dict, scope: str, path: str):
    value = context[scope]
    for part in path.split("."):
        value = value.get(part, "") if isinstance(value, dict) else ""
    return value


def evaluate(expression: str, context: dict, failed: bool):
    """The subset of GitHub's expression language action.yml uses."""
    python = NAME.sub(lambda m: repr(_value(context, m[1], m[2])), expression)
    python = re.sub(r"hashFiles\([^)]*\)", "'hash'", python)
    python = python.replace("cancelled()", "False").replace("always()", "True")
    python = python.replace("failure()", repr(failed)).replace("success()", repr(not failed))
    python = python.replace("&&", " and ").replace("||", " or ")
    python = re.sub(r"!(?!=)", " not ", python)
    return eval(python, {"__builtins__": {}})  # our own action file's expressions only


def substitute(text: str, context: dict, failed: bool) -> str:
    return EXPRESSION.sub(lambda m: str(evaluate(m[1], context, failed)), text)


def run_action(
    repo: Path,
    inputs: dict[str, str],
    base_ref: str,
    tmp: Path,
    only: tuple[str, ...] = (),
    path_first: Path | None = None,
) -> dict:
    """Run action.yml's steps in ``repo`` (``uses:`` steps are GitHub's own actions:
    skipped and listed; with ``only``, just the steps of those names; ``path_first``: a
    folder put first on PATH); return the exit code, outputs, summary, stdout and
    skipped."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    given = {name: spec.get("default", "") for name, spec in action["inputs"].items()}
    given.update(inputs)
    output_file, summary_file = tmp / "output", tmp / "summary.md"
    output_file.touch()
    summary_file.touch()
    context = {
        "inputs": given,
        "github": {
            "action_path": str(ROOT),
            "base_ref": base_ref,
            "workspace": str(repo),
            "ref_name": "pr",
            "ref": "refs/pull/7/merge",
            "run_id": "1",
            "run_attempt": "1",
            "job": "report",
            "event_name": "pull_request" if base_ref else "push",
        },
        "runner": {"temp": str(tmp / "runner-temp"), "os": "Linux", "arch": "X64"},
        "steps": {},
    }
    failed, code, stdout, skipped = False, 0, "", []
    for step in action["runs"]["steps"]:
        condition = step.get("if", "success()")
        condition = EXPRESSION.sub(lambda m: m[1], str(condition))
        if "cancelled()" not in condition and "always()" not in condition and failed:
            continue
        if not evaluate(condition, context, failed) or (only and step["name"] not in only):
            continue
        if "uses" in step:
            skipped.append(step["uses"].split("@")[0])
            continue
        step_output = tmp / f"output-{len(context['steps'])}"
        step_output.write_text("")
        env = {k: substitute(str(v), context, failed) for k, v in step.get("env", {}).items()}
        env = _environment(
            **env, GITHUB_OUTPUT=str(step_output), GITHUB_STEP_SUMMARY=str(summary_file),
            HOME=os.environ.get("HOME", str(tmp)), RUNNER_OS="Linux", RUNNER_ARCH="X64",
            GITHUB_RUN_ID="1",
        )  # fmt: skip
        if path_first is not None:
            env["PATH"] = f"{path_first}{os.pathsep}{env['PATH']}"
        script = substitute(step["run"], context, failed)
        done = subprocess.run(
            ["bash", "-e", "-c", script], cwd=repo, env=env, capture_output=True, text=True,
            timeout=900,
        )  # fmt: skip
        stdout += done.stdout
        outputs = dict(
            line.split("=", 1) for line in step_output.read_text().splitlines() if "=" in line
        )
        if "id" in step:
            context["steps"][step["id"]] = {"outputs": outputs}
        if done.returncode:
            failed, code = True, done.returncode
            stdout += done.stderr
    outputs = {
        name: substitute(str(spec["value"]), context, failed)
        for name, spec in action["outputs"].items()
    }
    return {
        "code": code, "outputs": outputs, "summary": summary_file.read_text(),
        "stdout": stdout, "skipped": skipped,
    }  # fmt: skip


def test_the_action_fails_a_pull_request_against_its_merge_base(pull_request, tmp_path):
    """The PR's head (a reworded comment) against its merge base with main (the scan), not
    against its previous commit (the loop, identical): the regression is found."""
    ran = run_action(
        pull_request, {"gates": "bench/gates.toml", "install": "false"}, "main", tmp_path
    )
    assert ran["code"] == 1, ran["stdout"]
    assert ran["outputs"] == {"verdict": "fail", "passed": "0", "failed": "1", "inconclusive": "0"}
    assert "## scanbench gate against" in ran["summary"] and "FAILED" in ran["summary"]
    assert "smoothing/smooth/smoke" in ran["summary"] and "head adds" in ran["summary"]
    errors = [line for line in ran["stdout"].splitlines() if line.startswith("::error")]
    assert len(errors) == 1 and "smoothing/smooth/smoke fail" in errors[0]
    assert "actions/upload-artifact" in ran["skipped"]  # it runs after a failed gate


def test_the_action_passes_a_change_that_measures_the_same(pull_request, tmp_path):
    inputs = {"gates": "bench/gates.toml", "install": "false", "baseline": "HEAD~1"}
    ran = run_action(pull_request, inputs, "", tmp_path)
    assert ran["code"] == 0, ran["stdout"]
    assert ran["outputs"]["verdict"] == "pass" and ran["outputs"]["failed"] == "0"
    assert "passed" in ran["summary"]
    assert not [line for line in ran["stdout"].splitlines() if line.startswith("::error")]


def test_the_action_keeps_a_history_of_the_report_run(pull_request, tmp_path):
    """``history: true``: the report run is added to the history (restored from and saved
    to the Actions cache, skipped here) and drawn into the artifact and the summary."""
    inputs = {
        "gates": "bench/gates.toml", "install": "false", "baseline": "HEAD~1",
        "scenarios": "bench/scenario.py", "history": "true",
    }  # fmt: skip
    ran = run_action(pull_request, inputs, "", tmp_path)
    assert ran["code"] == 0, ran["stdout"]
    out = tmp_path / "runner-temp"
    entries = list((out / "scanbench-history").glob("*.json"))
    assert len(entries) == 1 and entries[0].name.startswith(
        user_repo.git(pull_request, "rev-parse", "HEAD")[:12]
    )
    assert (out / "scanbench" / "history.html").stat().st_size > 0
    assert "gha-Linux-X64" in ran["summary"]
    assert {"actions/cache/restore", "actions/cache/save"} <= set(ran["skipped"])


def test_the_action_splits_the_report_run_over_a_matrix_and_gathers_it(pull_request, tmp_path):
    """``shard: K/N`` jobs each measure a shard (no gate) and upload it under its own
    name; the ``gather: true`` job gathers what download-artifact put in one folder per
    artifact, reports it, adds it to the history and says where a pull request's
    history goes."""
    artifacts = tmp_path / "gather" / "runner-temp" / "scanbench-shards"
    for index in (1, 2):
        job = tmp_path / f"shard{index}"
        job.mkdir()
        inputs = {"install": "false", "scenarios": "bench/scenario.py", "shard": f"{index}/2"}
        ran = run_action(pull_request, inputs, "main", job)
        assert ran["code"] == 0, ran["stdout"]
        assert "actions/upload-artifact" in ran["skipped"] and not ran["outputs"]["verdict"]
        (made,) = (job / "runner-temp" / "scanbench-shard").glob("*.json")
        assert made.name == f"shard-{index}-of-2.json"
        folder = artifacts / f"scanbench-shard-{index}-of-2"  # as download-artifact lays them
        folder.mkdir(parents=True)
        shutil.copy(made, folder / made.name)
    inputs = {"install": "false", "gather": "true", "history": "true"}
    (tmp_path / "gather").mkdir(exist_ok=True)
    ran = run_action(pull_request, inputs, "main", tmp_path / "gather")
    assert ran["code"] == 0, ran["stdout"]
    assert "actions/download-artifact" in ran["skipped"]
    out = tmp_path / "gather" / "runner-temp" / "scanbench"
    merged = yaml.safe_load((out / "results.json").read_text())  # JSON is YAML
    assert merged["invocation"]["gathered"]["count"] == 2
    assert [r["backend"] for r in merged["records"]] == ["smooth"]
    assert (
        len(list((tmp_path / "gather" / "runner-temp" / "scanbench-history").glob("*.json"))) == 1
    )
    assert "- shard 1/2 (shard-1-of-2.json): 1 cells on " in ran["summary"]
    assert "- shard 2/2 (shard-2-of-2.json): 0 cells on " in ran["summary"]
    assert "only later runs of this pull request restore it" in ran["summary"]
    assert "no gate run: the 'gates' input is empty" in ran["stdout"]


def test_a_malformed_shard_input_is_a_usage_error(pull_request, tmp_path):
    inputs = {"install": "false", "scenarios": "bench/scenario.py", "shard": "2 of 3"}
    ran = run_action(pull_request, inputs, "main", tmp_path)
    assert ran["code"] == 2 and "the 'shard' input must be K/N" in ran["stdout"]


def test_the_action_without_a_baseline_is_a_usage_error(pull_request, tmp_path):
    ran = run_action(pull_request, {"gates": "bench/gates.toml", "install": "false"}, "", tmp_path)
    assert ran["code"] == 2 and "no baseline" in ran["stdout"]


FIND_BASE = ("Find the baseline revision",)


@pytest.fixture
def clone(pull_request, tmp_path) -> Path:
    """A checkout of the pull request as `fetch-depth: 0` leaves it (every branch under
    refs/remotes/origin/), whose origin can no longer be fetched from (as a private
    repository checked out with `persist-credentials: false`)."""
    where = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(pull_request), str(where)], check=True)
    user_repo.git(where, "remote", "set-url", "origin", str(tmp_path / "no-such-remote"))
    return where


def test_the_action_fetches_nothing_when_the_checkout_has_the_base(clone, tmp_path):
    ran = run_action(clone, {"gates": "g.toml"}, "main", tmp_path, only=FIND_BASE)
    assert ran["code"] == 0, ran["stdout"]
    merge_base = user_repo.git(clone, "merge-base", "HEAD", "origin/main").strip()
    assert f"comparing with {merge_base}" in ran["stdout"]


def test_the_action_says_how_to_get_a_base_it_cannot_fetch(clone, tmp_path):
    user_repo.git(clone, "update-ref", "-d", "refs/remotes/origin/main")
    ran = run_action(clone, {"gates": "g.toml"}, "main", tmp_path, only=FIND_BASE)
    assert ran["code"] == 2
    assert (
        "::error title=scanbench gate::the checkout lacks the base branch 'main'" in ran["stdout"]
    )
    assert "fetch-depth: 0" in ran["stdout"]


@pytest.mark.parametrize("baseline", ["--output=/tmp/x", "no-such-revision"])
def test_a_baseline_that_is_no_commit_is_refused(clone, tmp_path, baseline):
    inputs = {"gates": "g.toml", "baseline": baseline}
    ran = run_action(clone, inputs, "", tmp_path, only=FIND_BASE)
    assert ran["code"] == 2 and "::error title=scanbench gate::" in ran["stdout"]
    assert not Path("/tmp/x^{commit}").exists()


def test_a_mistyped_scenario_path_fails_the_report_step(pull_request, tmp_path):
    """Exit 2 of the report run is an input error, not a "cell failed" warning."""
    inputs = {"gates": "g.toml", "scenarios": "bench/no_such_scenario.py"}
    only = ("Measure the scenarios for the report",)
    ran = run_action(pull_request, inputs, "", tmp_path, only=only)
    assert ran["code"] == 2
    assert "scanbench run exited with 2: a usage or input error" in ran["stdout"]
    assert "no_such_scenario.py" in ran["stdout"] and "::warning" not in ran["stdout"]


def _exiting(tmp_path: Path, code: int) -> Path:
    """A folder holding a `scanbench` that exits with ``code`` (a crash stand-in)."""
    folder = tmp_path / f"exits-{code}"
    folder.mkdir()
    fake = folder / "scanbench"
    fake.write_text(f'#!/bin/sh\necho "crashed: $*" >&2\nexit {code}\n')
    fake.chmod(0o755)
    return folder


def test_a_crashed_history_add_fails_the_step_and_says_so(pull_request, tmp_path):
    """A crash (70) is not "not added" (1, a tree with uncommitted changes)."""
    out = tmp_path / "runner-temp" / "scanbench"
    out.mkdir(parents=True)
    (out / "results.json").write_text("{}")
    inputs = {"gates": "g.toml", "scenarios": "bench/scenario.py", "history": "true"}
    only = ("Add the run to the history and draw it",)
    ran = run_action(pull_request, inputs, "", tmp_path, only, _exiting(tmp_path, 70))
    assert ran["code"] == 70
    assert "scanbench history add exited with 70" in ran["stdout"]


@pytest.mark.parametrize(("code", "named"), [(1, False), (2, True), (70, True), (143, True)])
def test_the_gate_step_names_any_exit_that_is_not_a_verdict(pull_request, tmp_path, code, named):
    only = ("Run the gate against the baseline",)
    ran = run_action(
        pull_request, {"gates": "g.toml"}, "", tmp_path, only, _exiting(tmp_path, code)
    )
    assert ran["code"] == code
    assert (f"scanbench gate exited with {code}, not a verdict" in ran["stdout"]) == named


@pytest.mark.parametrize("tool", ["actionlint", "zizmor"])
def test_the_workflow_and_the_action_pass_the_linters(tool):
    binary = shutil.which(tool, path=str(Path(sys.executable).parent)) or shutil.which(tool)
    if binary is None:
        pytest.fail(f"{tool} is not installed (it is in the dev extra)")
    files = [str(p) for p in (ROOT / ".github" / "workflows").glob("*.yml")]
    command = [binary, *files] if tool == "actionlint" else [binary, "--offline", str(ROOT)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def _history_keys(history_key: str) -> list[str]:
    """Every history cache key and restore key of action.yml, evaluated for job "report"
    with ``history-key`` given."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    context = {
        "inputs": {"history-key": history_key},
        "github": {"run_id": "1", "run_attempt": "2", "job": "report"},
        "runner": {"os": "Linux", "arch": "X64"},
    }
    keys = []
    for step in action["runs"]["steps"]:
        fields = {**step.get("with", {}), **step.get("env", {})}
        for name in ("key", "restore-keys", "KEY"):
            text = str(fields.get(name, ""))
            if "scanbench-history" in text:
                keys += substitute(text, context, False).split()
    return keys


def test_each_matrix_leg_restores_and_saves_only_its_own_history():
    """Issue 69: the history key was the job's id alone, shared by every matrix leg, and
    the restore fell back to any key of the OS: legs overwrote each other's history."""
    for history_key, leg in (("", "report"), ("ubuntu-py3.12", "ubuntu-py3.12")):
        keys = _history_keys(history_key)
        assert len(keys) == 4, keys  # restore, its restore key, save, the pull request's line
        assert all(key.startswith(f"scanbench-history-Linux-X64-{leg}-") for key in keys), keys
    assert _history_keys("a") != _history_keys("b")


def test_the_final_upload_replaces_an_earlier_attempts_artifact():
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    uploads = [s for s in action["runs"]["steps"] if "upload-artifact" in s.get("uses", "")]
    assert uploads and all(s["with"].get("overwrite") is True for s in uploads)

"""One import name and arrows that point down: the package's layout, read from its code.

The import graph is read from the source (every ``import`` statement, inside functions
and ``TYPE_CHECKING`` blocks too), with the folders mapped as the wheel installs them
(``[tool.setuptools] package-dir`` of ``pyproject.toml``), so it sees what a drawing of the
repository's folders cannot: the imports between those three folders.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import scanbench
from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
# folder on disk -> import name, as the wheel installs them
FOLDERS = {
    folder: package
    for package, folder in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"][
        "setuptools"
    ]["package-dir"].items()
}


def _modules() -> dict[str, Path]:
    """Every module of the installed package: dotted name -> file."""
    found = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _imports(name: str) -> set[str]:
    """The package's own modules that module ``name`` imports (relative or absolute)."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    here = name if _is_package(name) else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:  # `from pkg import module` imports pkg.module
                targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
    own = set()
    for target in targets:
        while target and target not in MODULES:
            target = target.rpartition(".")[0]
        if target and target != name:
            own.add(target)
    return own


GRAPH = {name: _imports(name) for name in MODULES}


def _cycles() -> list[list[str]]:
    """The import circles (strongly connected components of more than one module)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in GRAPH[node]:
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in GRAPH:
        if node not in index:
            visit(node)
    return found


def test_the_package_has_no_import_circle():
    assert _cycles() == []


FRONTS = {"scanbench.cli", "scanbench.notebook", "scanbench.pytest_plugin"}


def _front(name: str) -> bool:
    return any(name == front or name.startswith(front + ".") for front in FRONTS)


def test_the_engine_never_imports_the_reports_or_the_front_doors():
    """Only the command line and the notebook API (and the package's lazy face) may
    import the reports; nothing below them imports them."""
    for name, targets in GRAPH.items():
        if _front(name) or name == "scanbench" or name.startswith("scanbench.reports"):
            continue
        wrong = {t for t in targets if t.startswith("scanbench.reports") or _front(t)}
        assert not wrong, f"{name} imports {sorted(wrong)}"


def test_the_reports_read_results_and_never_run_anything():
    allowed = ("scanbench.reports", "scanbench.api", "scanbench.counts", "scanbench.results",
               "scanbench.diagnosis", "scanbench.findings", "scanbench.gap",
               "scanbench.archive_map",
               "scanbench.decomposition",
               "scanbench.statistics", "scanbench.units", "scanbench.errors",
               "scanbench.import_path", "scanbench.bounds", "scanbench.safe_files",
               "scanbench.gathered", "scanbench.shown_text",
               "scanbench.extras",
               # where a trace is and how to reach it; which code renders (git, metadata);
               # the typed request a run stored (a notebook call or a command)
               "scanbench.trace_route", "scanbench.checkout", "scanbench.invocation")  # fmt: skip
    for name, targets in GRAPH.items():
        if name.startswith("scanbench.reports"):
            wrong = {t for t in targets if not t.startswith(allowed)}
            assert not wrong, f"{name} imports {sorted(wrong)}"


def test_bundled_scenarios_use_the_public_namespace_only():
    # and scanbench.extras: the bundled scenarios' optional packages are scanbench's own
    # extras, whose line names them (a user's scenario has its own dependencies)
    for name, targets in GRAPH.items():
        if name.startswith("scanbench.scenarios"):
            outside = {t for t in targets if not t.startswith("scanbench.scenarios")}
            wrong = outside - {"scanbench", "scanbench.extras"}
            assert not wrong, f"{name} imports {sorted(wrong)}: use `from scanbench import ...`"


def test_the_worker_does_not_know_the_notebook_api():
    reached, todo = set(), ["scanbench.execution.worker"]
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(GRAPH[name])
    assert "scanbench.notebook" not in reached


def test_every_package_folder_is_in_the_wheel():
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    assert listed == {name for name in MODULES if _is_package(name)}


def test_no_command_function_is_longer_than_80_lines():
    for path in (ROOT / "harness" / "cli").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                length = node.end_lineno - node.lineno + 1
                assert length <= 80, f"{path.name}:{node.name} is {length} lines"


def test_the_public_names_resolve_and_importing_them_is_cheap():
    for name in scanbench.__all__:
        assert getattr(scanbench, name) is not None, name
    code = "import sys, scanbench; print(sorted({'jax', 'numpy', 'scipy'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_engine_imported_by_its_folder_name_says_how_to_import_it():
    """From this repository's root `harness/` is importable as a folder; it refuses and
    names the import to use."""
    code = "import harness"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 1
    assert "import it as `scanbench`" in out.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("from harness.api import Scenario", "'harness' is scanbench's import name before 0.2"),
        ("from harness.factories import jax_backend", "import 'scanbench' instead"),
        ("import mylib_that_is_not_here", "run scanbench from your project's root"),
    ],
)
def test_a_scenario_file_that_cannot_import_gets_one_line_and_the_fix(tmp_path, line, says):
    scenario = tmp_path / "old.py"
    scenario.write_text(f"{line}\n")
    command = [sys.executable, "-m", "scanbench.cli", "list", "--scenario-file", str(scenario)]
    out = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    (message,) = out.stderr.strip().splitlines()
    assert message.startswith("scanbench: error: ./old.py:1: ModuleNotFoundError")
    assert says in message


def _folder(module: str) -> str:
    """The top folder (on disk) of a dotted module name: the longest package-dir prefix."""
    package = max(
        (p for p in FOLDERS.values() if module == p or module.startswith(p + ".")), key=len
    )
    return next(folder for folder, name in FOLDERS.items() if name == package)


def test_imports_that_cross_the_three_folders_are_absolute():
    """A relative import that leaves its folder reads one way on disk and another installed:
    across ``harness/``, ``reports/`` and ``scenarios/`` every import names ``scanbench``."""
    wrong = []
    for name, path in MODULES.items():
        here = name if _is_package(name) else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                anchor = here.split(".")[: len(here.split(".")) - node.level + 1]
                target = ".".join([*anchor, *([node.module] if node.module else [])])
                if _folder(target) != _folder(name):
                    wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {target}")
    assert not wrong, "use `from scanbench... import`: " + "; ".join(wrong)


# file names that may repeat: the same kind of module in parallel packages
PARALLEL = {"__init__.py", "problem.py", "library.py", "sharded.py", "roofline.py"}


def test_no_two_modules_share_a_file_name_unless_they_are_parallel():
    names: dict[str, list[str]] = {}
    for path in MODULES.values():
        names.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    repeated = {n: sorted(ps) for n, ps in names.items() if len(ps) > 1 and n not in PARALLEL}
    assert not repeated
    for name in PARALLEL - {"__init__.py"}:  # parallel: only the scenario packages
        assert all(p.startswith("scenarios/") for p in names.get(name, [])), names[name]


def test_code_and_docs_name_modules_by_their_import_name():
    """``scanbench.gate.serve``, never ``harness/gate/serve.py``: the name works installed."""
    pattern = re.compile(r"(?<![\w./-])(?:harness|reports|scenarios)/[\w/]+\.py\b")
    sources = [*MODULES.values(), *(ROOT / "docs").glob("*.md"), ROOT / "README.md"]
    wrong = [
        f"{path.relative_to(ROOT)}:{number}: {match.group(0)}"
        for path in sources
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for match in pattern.finditer(line)
    ]
    assert not wrong, "name modules by import name: " + "; ".join(wrong[:20])

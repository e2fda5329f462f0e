"""Tables of the manual drawn from the code's own constants, so that they cannot drift.

Each is the content of a ``table: NAME [KEY=VALUE ...]`` block (see `blocks`), redrawn by
``python docs/figures.py`` and checked by the tests:

- ``commands``: every command of `scanbench.cli.main.COMMANDS` with its parser's help,
  linked to the section of the manual that describes it;
- ``exit-codes``: per command, the exit codes its handler returns (read from its source)
  and what each means (`EXIT_MEANINGS`: a code without a meaning, or a meaning of a
  code the handler never returns, fails the generation);
- ``count-keys``: every per-call count of `scanbench.Counts` (`COUNT_KEYS`);
- ``gated-counts``: the counts the gate holds exactly, with the breakdown that names
  what grew;
- ``factories [option=NAME]``: the backend factories of `scanbench.__all__` and their
  parameters (with ``option=``: whether each takes that keyword);
- ``folders``: the three folders and the import names they install as
  (``pyproject.toml``);
- ``layout``: the repository's tree, each module with the first sentence of its
  docstring, each other file with its first comment;
- ``api names=NAME,...``: those names of `scanbench.__all__`, each with its signature and
  docstring (`api_reference`).

Names are read from the code through its public entry points (``scanbench.Counts``'s
module, ``scanbench.cli.main``), so that a module renamed or moved is followed.
"""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import api_reference  # docs/, beside this module (figures.py and the tests put it on the path)

ROOT = Path(__file__).resolve().parent.parent
WIDTH = 100  # the layout's text block, as wide as the code

# what each exit code of each command means; the codes come from the handlers' source
EXIT_MEANINGS: dict[str, dict[int, str]] = {
    "*": {
        2: "a usage or input error: one line on stderr naming what is wrong, never a traceback",
        70: "a crash (a bug in scanbench): its traceback and one line on stderr",
    },
    "interrupted": {
        130: "interrupted by Ctrl-C (SIGINT); the cells finished are saved",
        143: "stopped by SIGTERM; the cells finished are saved",
    },
    "list": {0: "listed"},
    "run": {0: "every cell ran", 1: "a cell failed (its error is stored and shown)"},
    "profile": {0: "traced and counted"},
    "report": {0: "written"},
    "gather": {0: "merged and written", 1: "a merged shard holds a failed cell (shown)"},
    "gate": {
        0: "no regression (inconclusive rules are shown)",
        1: "a rule failed (with `--strict`, also an inconclusive one)",
    },
    "ab": {
        0: "no cell significantly slower on B",
        1: "a cell significantly slower on B",
    },
    "flags": {0: "measured (or listed)"},
    "history": {0: "done", 1: "`history add` skipped a file (said on stderr)"},
    "bisect": {
        0: "found the commit",
        1: "GOOD and BAD do not differ",
        3: "not pinned down: a step stayed undecided, or the commits left could not be measured",
    },
}

# top-level entries that carry neither a docstring nor a first comment
NOTES: dict[str, str] = {
    "docs": "this manual (MkDocs); docs/results/: the runs its figures are drawn from",
    "tests": "the test suite (pytest); `nox -s tests` runs it",
    ".github": "this repository's workflows (the gate on pull requests, the manual's site)",
    "CHANGELOG.md": "what changed for users, newest first",
    "README.md": "the front door: what scanbench is, how to start, where the manual is",
    ".gitignore": "what git leaves out (results/, site/, build output)",
}


# ---------------------------------------------------------------- the command line


def _parser():
    from scanbench.cli.main import build_parser

    return build_parser()


def _subcommands() -> dict[str, str]:
    """Every command's name and its one-line help, in the order of ``scanbench --help``."""
    import argparse

    action = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {choice.dest: choice.help or "" for choice in action._choices_actions}


def _modules() -> dict[str, object]:
    from scanbench.cli import main

    return dict(main.COMMANDS)


HEADING = re.compile(r"^(#{2,4}) +(?P<title>.+?) *$", re.M)


def _slug(title: str) -> str:
    """The anchor GitHub and MkDocs both give a plain heading."""
    text = re.sub(r"[^\w\- ]", "", title.lower().replace("`", ""))
    return re.sub(r"[ ]+", "-", text.strip())


def _outside_fences(text: str) -> str:
    import blocks

    return blocks.FENCE.sub(lambda match: "\n" * match.group(0).count("\n"), text)


def _nav_pages() -> list[Path]:
    """The manual's pages in reading order (``mkdocs.yml``'s nav), then any others."""
    import yaml

    def walk(item) -> list[str]:
        if isinstance(item, str):
            return [item]
        if isinstance(item, list):
            return [page for entry in item for page in walk(entry)]
        if isinstance(item, dict):
            return [page for value in item.values() for page in walk(value)]
        return []

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nhooks:")[0])
    listed = [ROOT / "docs" / name for name in walk(config["nav"])]
    return listed + sorted(set((ROOT / "docs").rglob("*.md")) - set(listed))


def _section_of(command: str, page: Path) -> str:
    """A link from ``page`` to the section that describes ``command``: a heading of that
    name on the page itself, else on any page, else the section holding its ``--help``."""
    candidates = [page, *[p for p in _nav_pages() if p != page]]
    for wanted in ("heading", "help"):
        for other in candidates:
            text = _outside_fences(other.read_text(encoding="utf-8"))
            target = None
            if wanted == "heading":
                for match in HEADING.finditer(text):
                    if match["title"].strip("`").lower() == command:
                        target = _slug(match["title"])
                        break
            else:
                marker = re.search(rf"<!--\s*scanbench-help:\s*{re.escape(command)}\s*-->", text)
                if marker:
                    above = list(HEADING.finditer(text[: marker.start()]))
                    target = _slug(above[-1]["title"]) if above else ""
            if target is not None:
                name = "" if other == page else _relative(other, page)
                return f"{name}#{target}" if target else name
    raise KeyError(f"no section of the manual describes `scanbench {command}`")


def _relative(target: Path, page: Path) -> str:
    import os

    return os.path.relpath(target, page.parent).replace(os.sep, "/")


def commands(page: Path) -> str:
    lines = ["| command | what it does |", "| --- | --- |"]
    for name, help_text in _subcommands().items():
        lines.append(f"| [`{name}`]({_section_of(name, page)}) | {help_text} |")
    return "\n".join(lines)


def _returns_of(path: Path, only: str | None = None, seen: frozenset = frozenset()) -> set[int]:
    """The integer exit codes a command module's ``-> int`` functions (or its function
    ``only``) return, following a ``return f(...)`` of a function it imports from another
    scanbench module (``gather`` returns what ``run``'s ``finish`` returns)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = _imported_names(path, tree)
    codes = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef) or (only is not None and node.name != only):
            continue
        if only is None and ast.unparse(node.returns or ast.Pass()) != "int":
            continue
        for inner in ast.walk(node):
            if not isinstance(inner, ast.Return) or inner.value is None:
                continue
            codes |= {
                c.value
                for c in ast.walk(inner.value)
                if isinstance(c, ast.Constant) and type(c.value) is int
            }
            call = inner.value
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
                target = imported.get(call.func.id)
                if target is not None and target not in seen:
                    codes |= _returns_of(target[0], target[1], seen | {target})
    return codes


def _imported_names(path: Path, tree: ast.Module) -> dict[str, tuple[Path, str]]:
    """Name -> (module file, function name) of the ``from scanbench... import`` names."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            file = _module_file(base)
            if file is not None:
                for alias in node.names:
                    found[alias.asname or alias.name] = (file, alias.name)
    return found


def _package_dirs() -> dict[str, Path]:
    """Import name -> folder, as ``pyproject.toml`` installs them."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    mapping = config["tool"]["setuptools"]["package-dir"]
    return {name: ROOT / folder for name, folder in mapping.items()}


def _module_file(name: str) -> Path | None:
    """The source file of the module ``scanbench.x.y`` on disk, if it is scanbench's."""
    dirs = _package_dirs()
    for package in sorted(dirs, key=len, reverse=True):
        if name == package or name.startswith(package + "."):
            rest = name[len(package) :].lstrip(".").split(".") if name != package else []
            base = dirs[package].joinpath(*rest) if rest else dirs[package]
            for candidate in (base / "__init__.py", base.with_suffix(".py")):
                if candidate.exists():
                    return candidate
    return None


def _module_name(path: Path) -> str:
    for package, folder in sorted(_package_dirs().items(), key=lambda kv: -len(str(kv[1]))):
        if path.is_relative_to(folder):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            parts = parts[:-1] if parts and parts[-1] == "__init__" else parts
            return ".".join([package, *parts])
    raise KeyError(f"{path} is not in a package of pyproject.toml")


def _imports(path: Path) -> set[Path]:
    """The scanbench modules ``path`` imports (at any depth of its code)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = []
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        for target in targets:
            file = _module_file(target)
            if file is not None:
                found.add(file)
    return found


def _reaches(path: Path, predicate: Callable[[str], bool]) -> bool:
    seen, todo = set(), [path]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        if predicate(current.read_text(encoding="utf-8")):
            return True
        todo += _imports(current) - seen
    return False


def _saves_on_signals(source: str) -> bool:
    """Code that turns SIGINT and SIGTERM into `Interrupted` (a clean stop, saved)."""
    return "signals_raise(" in source and "def signals_raise" not in source


def exit_codes_by_command() -> dict[str, set[int]]:
    """Every command's exit codes: those its handler returns, 2 and 70 for every command
    (a usage or input error, a crash: `scanbench.cli.main`), and 130 and 143 for those
    that reach the code that turns SIGINT and SIGTERM into a clean stop."""
    from scanbench.cli.main import CRASHED

    out = {}
    for name, module in _modules().items():
        path = Path(inspect.getsourcefile(module))
        codes = _returns_of(path) | {2, CRASHED}
        if _reaches(path, _saves_on_signals):
            codes |= {130, 143}
        out[name] = codes
    return out


def _meaning(command: str, code: int) -> str:
    for key in (command, "*", "interrupted"):
        if code in EXIT_MEANINGS.get(key, {}):
            return EXIT_MEANINGS[key][code]
    raise KeyError(
        f"`scanbench {command}` may exit {code}: say what it means in EXIT_MEANINGS "
        "(docs/tables.py)"
    )


def exit_codes(page: Path) -> str:
    found = exit_codes_by_command()
    described = {
        (command, code)
        for command, meanings in EXIT_MEANINGS.items()
        if command not in ("*", "interrupted")
        for code in meanings
    }
    unused = sorted(described - {(c, code) for c, codes in found.items() for code in codes})
    if unused:
        raise KeyError(
            f"EXIT_MEANINGS (docs/tables.py) describes exit codes no handler returns: {unused}"
        )
    lines = ["| command | exit code: meaning |", "| --- | --- |"]
    for command, codes in found.items():
        cells = [
            "**2**: usage or input error" if code == 2 else f"**{code}**: {_meaning(command, code)}"
            for code in sorted(codes - {130, 143})
        ]
        if 130 in codes:
            cells.append("**130**, **143**: interrupted, the finished cells saved")
        lines.append(f"| `{command}` | {'<br>'.join(cells)} |")
    for old, new in _renamed().items():
        lines.append(f"| `{old}` | **2**: renamed; says to use `scanbench {new}` |")
    return "\n".join(lines)


def _renamed() -> dict[str, str]:
    """Commands renamed since an earlier release (`scanbench.cli.main.RENAMED`), if any."""
    from scanbench.cli import main

    return dict(getattr(main, "RENAMED", {}))


# ---------------------------------------------------------------- counts and factories


def _counts_module():
    import importlib

    import scanbench

    return importlib.import_module(scanbench.Counts.__module__)


def count_keys(page: Path) -> str:
    lines = [
        "| key | report column | read from | gated | breakdown |",
        "| --- | --- | --- | --- | --- |",
    ]
    for key in _counts_module().COUNT_KEYS:
        gated = "exactly" if key.gated else "no"
        breakdown = f"`{key.breakdown}`" if key.breakdown else "-"
        source = f"`{key.section}.{key.field}`"
        lines.append(f"| `{key.name}` | {key.label} | {source} | {gated} | {breakdown} |")
    return "\n".join(lines)


def gated_counts(page: Path) -> str:
    lines = [
        "| key | report column | read from | breakdown that names what grew |",
        "| --- | --- | --- | --- |",
    ]
    for key in _counts_module().COUNT_KEYS:
        if key.gated:
            breakdown = f"`{key.breakdown}`" if key.breakdown else "-"
            source = f"`counts.{key.section}.{key.field}`"
            lines.append(f"| `{key.name}` | {key.label} | {source} | {breakdown} |")
    return "\n".join(lines)


def _factories() -> dict[str, Callable]:
    import scanbench

    names = [name for name in scanbench.__all__ if name.endswith("_backend")]
    return {name: getattr(scanbench, name) for name in names}


def _parameter(parameter: inspect.Parameter) -> str:
    if parameter.default is inspect.Parameter.empty:
        return f"`{parameter.name}`"
    default = parameter.default
    shown = getattr(default, "__name__", "").lstrip("_") or repr(default)
    return f"`{parameter.name}={shown}`"


def factories(page: Path, option: str | None = None) -> str:
    if option:
        lines = [f"| factory | takes `{option}=` |", "| --- | --- |"]
        for name, factory in _factories().items():
            takes = option in inspect.signature(factory).parameters
            lines.append(f"| `{name}` | {'yes' if takes else 'no'} |")
        return "\n".join(lines)
    lines = ["| factory | arguments | keyword options (default) |", "| --- | --- | --- |"]
    for name, factory in _factories().items():
        parameters = inspect.signature(factory).parameters.values()
        positional = [p for p in parameters if p.kind is not p.KEYWORD_ONLY]
        keywords = [p for p in parameters if p.kind is p.KEYWORD_ONLY]
        lines.append(
            f"| `{name}` | {', '.join(_parameter(p) for p in positional)} "
            f"| {', '.join(_parameter(p) for p in keywords)} |"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------- the layout


def folders(page: Path) -> str:
    lines = ["| folder | installs as |", "| --- | --- |"]
    for name, folder in _package_dirs().items():
        lines.append(f"| `{folder.relative_to(ROOT)}/` | `{name}` |")
    return "\n".join(lines)


def _tracked() -> list[Path]:
    """Files of the tree: tracked, or new and not ignored."""
    done = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    names = [name for name in done.stdout.split("\0") if name]
    return sorted(ROOT / name for name in names if (ROOT / name).exists())


def _plain(text: str) -> str:
    text = re.sub(r"``([^`]*)``", r"\1", text)
    text = re.sub(r"`([^`]*)`", r"\1", text)
    return " ".join(text.split())


def _first_sentence(text: str) -> str:
    paragraph = _plain(text.strip().split("\n\n")[0])
    match = re.search(r"(?<!e\.g)(?<!i\.e)([.?])(\s|$)", paragraph)
    if match is None:
        return paragraph
    return paragraph[: match.start() + (match[1] == "?")]  # a question keeps its mark


def describe(path: Path) -> str:
    """What a file or folder holds, from itself: a module's or package's docstring, a
    file's first comment, a Markdown file's title, else `NOTES`."""
    relative = str(path.relative_to(ROOT))
    if relative in NOTES:
        return NOTES[relative]
    if path.is_dir():
        for name in ("__init__.py", "conftest.py"):
            if (path / name).exists() and describe(path / name):
                return describe(path / name)
        return ""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".py":
        try:
            return _first_sentence(ast.get_docstring(ast.parse(text)) or "")
        except SyntaxError:
            return ""
    if path.suffix == ".md":
        title = re.search(r"^# (.+)$", text, re.M)
        return _plain(title[1]) if title else ""
    if path.suffix in (".yml", ".yaml") and re.search(r"^description:", text, re.M):
        found = re.search(r"^description: *>?-?\n?((?:  .+\n)+|.+)", text, re.M)
        return _first_sentence(found[1]) if found else ""
    if path.name == "pyproject.toml":
        return _first_sentence(tomllib.loads(text)["project"]["description"])
    comments = []
    for line in text.splitlines():
        if line.startswith("#!"):
            continue
        if line.startswith("#"):
            comments.append(line.lstrip("#").strip())
        elif comments or line.strip():
            break
    return _first_sentence(" ".join(comments))


def _line(name: str, depth: int, what: str) -> str:
    left = f"{'  ' * depth}{name}"
    column = 30
    room = WIDTH - max(column, len(left) + 2)
    if len(what) > room:
        what = _shortened(what, room)
    return f"{left.ljust(column - 2)}  {what}".rstrip()


def _shortened(what: str, room: int) -> str:
    """``what`` in at most ``room`` characters: cut after a whole clause (at ": " or "; ",
    else ", ", outside parentheses) when that keeps at least half, else at a word, "…"."""
    for marks in ((": ", "; "), (", ",)):
        cuts = [
            i
            for mark in marks
            for i in range(len(what))
            if what.startswith(mark, i)
            and room // 2 <= i <= room
            and what[:i].count("(") == what[:i].count(")")
        ]
        if cuts:
            return what[: max(cuts)]
    return what[: room - 1].rsplit(" ", 1)[0].rstrip(",;:(") + "…"


def layout(page: Path) -> str:
    """The repository's tree: the package folders module by module, the others by folder."""
    files = _tracked()
    packages = {folder: name for name, folder in _package_dirs().items()}
    tops = sorted({ROOT / f.relative_to(ROOT).parts[0] for f in files}, key=_top_order)
    out = []
    for top in tops:
        if top.is_dir() and top in packages:
            out += _package_lines(top, packages, files, 0)
        elif top.is_dir():
            inner = sorted({f.relative_to(top).parts[0] for f in files if f.is_relative_to(top)})
            shown = [top / name for name in inner if len(inner) <= 4 or (top / name).is_dir()]
            # a folder that says nothing of itself is described by what it holds
            what = describe(top) if describe(top) or shown else _required(top)
            out.append(_line(f"{top.name}/", 0, what))
            for child in shown:
                if child.is_dir():
                    what = describe(child) or _listing(child, files)
                    out.append(_line(f"{child.name}/", 1, what))
                else:
                    out.append(_line(child.name, 1, _required(child)))
        else:
            out.append(_line(top.name, 0, _required(top)))
    return "```text\n" + "\n".join(out) + "\n```"


def _listing(folder: Path, files: list[Path]) -> str:
    names = sorted({f.relative_to(folder).parts[0] for f in files if f.is_relative_to(folder)})
    return ", ".join(names)


def _top_order(path: Path) -> tuple:
    """Package folders first (as pyproject.toml lists them), then folders, then files."""
    order = list(_package_dirs().values())
    if path in order:
        return (0, order.index(path), "")
    return (1 if path.is_dir() else 2, 0, path.name.lower())


def _required(path: Path) -> str:
    what = describe(path)
    if not what:
        raise KeyError(
            f"{path.relative_to(ROOT)} says nothing of itself: give it a docstring or a first "
            "comment, or a line in NOTES (docs/tables.py)"
        )
    return what


def _package_lines(folder: Path, packages: dict, files: list[Path], depth: int) -> list[str]:
    title = f"{folder.name}/ ({packages[folder]})" if folder in packages else f"{folder.name}/"
    out = [_line(title, depth, _required(folder))]
    inside = [f for f in files if f.parent == folder and f.suffix == ".py"]
    for file in sorted(inside, key=lambda f: (f.name != "__init__.py", f.name)):
        if file.name != "__init__.py":
            out.append(_line(file.name, depth + 1, _required(file)))
    subfolders = {f.parent for f in files if f.parent.parent == folder and f.suffix == ".py"}
    for sub in sorted(subfolders):
        if (sub / "__init__.py").exists() and sub not in packages:
            out += _package_lines(sub, packages, files, depth + 1)
    return out


# ---------------------------------------------------------------- the dispatcher


def _api(page: Path, names: str) -> str:
    return api_reference.api(page, names)


TABLES: dict[str, Callable[..., str]] = {
    "commands": commands,
    "exit-codes": exit_codes,
    "count-keys": count_keys,
    "gated-counts": gated_counts,
    "factories": factories,
    "folders": folders,
    "layout": layout,
    "api": _api,
}


def render(args: str, page: Path) -> str:
    """The table ``args`` names (``NAME [KEY=VALUE ...]``) as Markdown, for ``page``."""
    name, *rest = args.split()
    if name not in TABLES:
        raise KeyError(f"no table {name!r}; choose one of: {', '.join(TABLES)}")
    options = dict(option.split("=", 1) for option in rest)
    return TABLES[name](page, **options)


if __name__ == "__main__":  # print one table: python docs/tables.py NAME
    print(render(" ".join(sys.argv[1:]), ROOT / "docs" / "index.md"))

"""The API reference as plain Markdown: each public name's signature and docstring.

The content of a ``table: api names=NAME,NAME,...`` block (see `blocks`): for each name of
`scanbench.__all__` it lists, a heading, its signature (or value) and its docstring, the
Google-style sections turned into lists and the examples into ``pycon`` blocks; a class
adds its enum members or its public methods and properties, a module its functions.
GitHub and the built site then show the same reference, and ``python docs/figures.py
--check`` fails when a signature or a docstring changes and the page does not.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import types
from pathlib import Path

WIDTH = 88  # a signature longer than this is written one parameter a line

# the public names that are values, not functions or classes: what each one is
CONSTANTS: dict[str, str] = {
    "DTYPES": "The dtypes a scenario may declare in `Scenario.dtypes` (and `--dtype` takes).",
    "__version__": 'The installed version of scanbench, a string such as `"0.2.0"`.',
}
SECTIONS = re.compile(
    r"^(?P<title>Args|Arguments|Attributes|Returns|Yields|Raises|Example|Examples|Note|Notes)"
    r":[ \t]*$",
    re.M,
)
LISTED = {"Args", "Arguments", "Attributes", "Raises"}
ITEM = re.compile(r"^(?P<name>\*{0,2}[\w.]+)(?: \((?P<type>[^)]*)\))?: ?(?P<text>.*)$")


def _annotation(annotation: object) -> str:
    if isinstance(annotation, str):  # postponed (``from __future__ import annotations``)
        return annotation
    return inspect.formatannotation(annotation)


def _default(value: object) -> str:
    """A default as code would spell it (strings in double quotes, as ``ruff format``
    writes the page's code blocks), never with a memory address."""
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if callable(value) and hasattr(value, "__name__"):
        return value.__name__
    if isinstance(value, str) and '"' not in value:
        return '"' + repr(value)[1:-1] + '"'
    if isinstance(value, tuple):
        items = [_default(item) for item in value]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    return re.sub(r" at 0x[0-9a-f]+", "", repr(value))


def _defaults_of_fields(obj: type) -> dict[str, str]:
    """A dataclass's field defaults made by a factory, shown as the factory's call."""
    if not dataclasses.is_dataclass(obj):
        return {}
    return {
        field.name: f"{_default(field.default_factory)}()"
        for field in dataclasses.fields(obj)
        if field.default_factory is not dataclasses.MISSING
    }


def _parameter(parameter: inspect.Parameter, factories: dict[str, str]) -> str:
    text = parameter.name
    if parameter.kind is parameter.VAR_POSITIONAL:
        text = f"*{text}"
    elif parameter.kind is parameter.VAR_KEYWORD:
        text = f"**{text}"
    if parameter.annotation is not parameter.empty:
        text += f": {_annotation(parameter.annotation)}"
    if parameter.name in factories:
        text += f" = {factories[parameter.name]}"
    elif parameter.default is not parameter.empty:
        text += f" = {_default(parameter.default)}"
    return text


def signature(name: str, obj: object) -> str:
    """``name(parameters) -> returns``, wrapped one parameter a line when long."""
    try:
        found = inspect.signature(obj)
    except (TypeError, ValueError):
        return f"{name}(...)"
    factories = _defaults_of_fields(obj) if isinstance(obj, type) else {}
    parts, previous = [], None
    for parameter in found.parameters.values():
        if parameter.kind is parameter.KEYWORD_ONLY and previous not in (
            parameter.KEYWORD_ONLY,
            parameter.VAR_POSITIONAL,
        ):
            parts.append("*")
        if previous is parameter.POSITIONAL_ONLY and parameter.kind is not previous:
            parts.append("/")
        parts.append(_parameter(parameter, factories))
        previous = parameter.kind
    if previous is inspect.Parameter.POSITIONAL_ONLY:
        parts.append("/")
    returns = ""
    if found.return_annotation is not found.empty and not isinstance(obj, type):
        returns = f" -> {_annotation(found.return_annotation)}"
    line = f"{name}({', '.join(parts)}){returns}"
    if len(line) <= WIDTH:
        return line
    inner = "".join(f"    {part},\n" for part in parts)
    return f"{name}(\n{inner}){returns}"


def _items(body: str) -> str:
    """An Args/Attributes/Raises section as a Markdown list, continuation lines joined."""
    entries: list[list[str]] = []
    for line in body.splitlines():
        if not line.strip():
            continue
        match = ITEM.match(line) if not line.startswith(" ") else None
        if match:
            kind = f" ({match['type']})" if match["type"] else ""
            entries.append([f"- `{match['name']}`{kind}: {match['text']}".rstrip()])
        elif entries:
            entries[-1].append(line.strip())
        else:
            entries.append([f"- {line.strip()}"])
    return "\n".join(" ".join(entry) for entry in entries)


def _example(body: str) -> str:
    """An Example section: its doctest lines as a ``pycon`` block, its prose as text."""
    out, code = [], []
    for line in body.splitlines():
        if line.startswith((">>>", "...")) or (code and line.strip()):
            code.append(line)
            continue
        if code:
            out.append("```pycon\n" + "\n".join(code) + "\n```")
            code = []
        out.append(line)
    if code:
        out.append("```pycon\n" + "\n".join(code) + "\n```")
    return "\n".join(out).strip("\n")


def _prose(text: str) -> str:
    """Docstring prose as Markdown: indented lines (a continued item) lose their indent so
    that Markdown does not read them as code."""
    return "\n".join(line.strip() if line.startswith("    ") else line for line in text.split("\n"))


def docstring(text: str) -> str:
    """A Google-style docstring as Markdown."""
    matches = list(SECTIONS.finditer(text))
    out = [_prose(text[: matches[0].start()] if matches else text).strip()]
    for match, following in zip(matches, [*matches[1:], None], strict=False):
        title = match["title"]
        end = following.start() if following else len(text)
        body = inspect.cleandoc(text[match.end() : end].strip("\n"))
        if title in LISTED:
            rendered = _items(body)
        elif title.startswith("Example"):
            rendered = _example(body)
        else:
            rendered = _prose(body)
        out.append(f"**{title}**\n\n{rendered}")
    return "\n\n".join(part for part in out if part)


def _own_doc(obj: object) -> str:
    """The docstring ``obj`` itself has (not one inherited from a builtin base)."""
    doc = inspect.getdoc(obj) or ""
    if isinstance(obj, type) and obj.__doc__ is None:
        return ""
    return doc


def _first_paragraph(obj: object) -> str:
    return " ".join((inspect.getdoc(obj) or "").split("\n\n")[0].split())


def _members(obj: type) -> list[str]:
    """An enum's members, or a class's public methods and properties with their summary."""
    if issubclass(obj, enum.Enum):
        return [f"- `{member.name}` = `{member.value!r}`" for member in obj]
    fields = (
        {field.name for field in dataclasses.fields(obj)}
        if dataclasses.is_dataclass(obj)
        else set()
    )
    lines = []
    for name, value in vars(obj).items():
        if name.startswith("_") or name in fields:  # a field's default is not a method
            continue
        if isinstance(value, property):
            shown = f"`{name}` (property)"
        elif isinstance(value, staticmethod | classmethod | types.FunctionType):
            function = value.__func__ if hasattr(value, "__func__") else value
            bound = (
                inspect.signature(function).replace(
                    parameters=list(inspect.signature(function).parameters.values())[1:]
                )
                if not isinstance(value, staticmethod)
                else inspect.signature(function)
            )
            shown = f"`{name}{_short(bound)}`"
        else:
            continue
        summary = _first_paragraph(value.fget if isinstance(value, property) else value)
        lines.append(f"- {shown}: {summary}" if summary else f"- {shown}")
    return lines


def _short(found: inspect.Signature) -> str:
    """A method's parameters by name only (its annotations are in its docstring)."""
    names = []
    for parameter in found.parameters.values():
        prefix = {parameter.VAR_POSITIONAL: "*", parameter.VAR_KEYWORD: "**"}.get(
            parameter.kind, ""
        )
        names.append(prefix + parameter.name)
    return f"({', '.join(names)})"


def _module_functions(module: types.ModuleType) -> list[tuple[str, object]]:
    return [
        (name, value)
        for name, value in vars(module).items()
        if not name.startswith("_")
        and inspect.isfunction(value)
        and value.__module__ == module.__name__
    ]


def _code(text: str) -> str:
    return f"<!-- notest: a signature, not a program -->\n```python\n{text}\n```"


def entry(name: str, obj: object) -> str:
    """One public name: heading, signature (or value) and docstring, then its members."""
    parts = [f"### `scanbench.{name}`"]
    if isinstance(obj, types.ModuleType):
        parts.append(docstring(inspect.getdoc(obj) or ""))
        for function_name, function in _module_functions(obj):
            parts.append(f"#### `scanbench.{name}.{function_name}`")
            parts.append(_code(signature(function_name, function)))
            parts.append(docstring(inspect.getdoc(function) or ""))
        return "\n\n".join(part for part in parts if part)
    if not (inspect.isclass(obj) or callable(obj)):
        if name not in CONSTANTS:
            raise KeyError(
                f"scanbench.{name} is a value: say what it is in CONSTANTS (docs/api_reference.py)"
            )
        shown = f"{name}: {type(obj).__name__}"
        if name != "__version__":  # the version changes with every release, not the API
            shown += f" = {_default(obj)}"
        return "\n\n".join([*parts, _code(shown), CONSTANTS[name]])
    if inspect.isclass(obj) and issubclass(obj, enum.Enum | BaseException):
        parts.append(_code(f"class {name}({obj.__bases__[0].__name__})"))  # its base says it
    else:
        kind = "class " if inspect.isclass(obj) else ""
        parts.append(_code(kind + signature(name, obj)))
    parts.append(docstring(_own_doc(obj)))
    if inspect.isclass(obj):
        members = _members(obj)
        if members:
            title = "Members" if issubclass(obj, enum.Enum) else "Methods and properties"
            parts.append(f"**{title}**\n\n" + "\n".join(members))
    return "\n\n".join(part for part in parts if part)


def api(page: Path, names: str) -> str:
    """The entries of ``names`` (comma-separated names of `scanbench.__all__`), in order."""
    import scanbench

    wanted = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in scanbench.__all__]
    if unknown:
        raise KeyError(f"not in scanbench.__all__: {', '.join(unknown)}")
    return "\n\n".join(entry(name, getattr(scanbench, name)) for name in wanted)

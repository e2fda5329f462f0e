"""XLA flags as scanbench handles them: the flags a backend declares for its worker, one
``XLA_FLAGS`` string made of several groups, whether the installed jaxlib takes a flag,
and the curated candidates ``scanbench flags`` measures.

XLA reads ``XLA_FLAGS`` once, when JAX starts its backend, and treats a wrong flag in
three ways, all of which `refusals` turns into one line naming the flag:

- an unknown top-level flag (``--xla_cpu_no_such_flag``) or a value it cannot parse
  aborts the process (``Unknown flag in XLA_FLAGS``, ``Flag parsing failed``);
- a backend option (``--xla_backend_extra_options=NAME[=VALUE]``, comma-separated) that
  is not an ``xla_cpu_`` / ``xla_gpu_`` name goes to LLVM's option parser at the first
  compilation, which exits (``Unknown command line argument``);
- an ``xla_cpu_`` / ``xla_gpu_`` backend option is looked up by name where it is used: a
  misspelt one is *silently ignored*. It is refused here when its name is nowhere in the
  installed jaxlib's shared libraries.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence

from .errors import InputError

EXTRA = "--xla_backend_extra_options"
FLAG = re.compile(r"^--xla_[a-z0-9_]+(=\S*)?$")
OPTION = re.compile(r"^[A-Za-z0-9_.-]+(=[^,\s]*)?$")
NAMED_OPTION = re.compile(r"^xla_(cpu|gpu)_[a-z0-9_]+$")  # looked up by name: unchecked by XLA


def flag_name(flag: str) -> str:
    """``--xla_cpu_ftz=false`` -> ``--xla_cpu_ftz``."""
    return flag.partition("=")[0]


def extra_options(flag: str) -> tuple[str, ...]:
    """The backend options of an ``--xla_backend_extra_options=a,b=1`` flag (else ())."""
    name, _, value = flag.partition("=")
    if name != EXTRA:
        return ()
    return tuple(item for item in value.split(",") if item)


def malformed(flag: str) -> str | None:
    """Why ``flag`` is not written as an XLA flag, or None: ``--xla_NAME[=VALUE]``, and a
    backend option list of ``NAME[=VALUE]`` items."""
    if not isinstance(flag, str) or not FLAG.match(flag):
        return "expected --xla_NAME or --xla_NAME=VALUE, without spaces"
    if flag_name(flag) == EXTRA:
        options = extra_options(flag)
        if not options:
            return f"{EXTRA} needs NAME[=VALUE] items, comma-separated"
        bad = [item for item in options if not OPTION.match(item)]
        if bad:
            return f"backend option {bad[0]!r} is not NAME or NAME=VALUE"
    return None


def merge(*groups: str | Iterable[str]) -> str:
    """One ``XLA_FLAGS`` value from several groups (strings or flag sequences), in order:
    a later flag replaces an earlier one of the same name (two lists in add/remove mode,
    ``+eltwise`` and ``+reduce``, are joined), and the backend options of
    every ``--xla_backend_extra_options`` are merged into one flag (a later option of the
    same name replaces the earlier)."""
    flags: dict[str, str] = {}
    options: dict[str, str] = {}
    for group in groups:
        for flag in group.split() if isinstance(group, str) else group:
            if flag_name(flag) == EXTRA:
                for item in extra_options(flag):
                    options[item.partition("=")[0]] = item
            else:
                name, _, value = flag.partition("=")
                earlier = flags.pop(name, None)  # keeps the order of the last setting
                before = earlier.partition("=")[2] if earlier is not None else ""
                if _signed(value) and _signed(before):  # "+a" then "+b": both change the default
                    items = {item[1:]: item for item in before.split(",")}
                    for item in value.split(","):
                        items.pop(item[1:], None)
                        items[item[1:]] = item
                    flag = f"{name}={','.join(items.values())}"
                flags[name] = flag
    out = list(flags.values())
    if options:
        out.append(f"{EXTRA}={','.join(options.values())}")
    return " ".join(out)


def _signed(value: str) -> bool:
    """A list in XLA's add/remove mode (``+eltwise,-dot``): later items add to earlier."""
    return bool(value) and all(item[:1] in "+-" and item[1:] for item in value.split(","))


def check_declared(owner: str, flags: Sequence[str]) -> None:
    """An `InputError` naming ``owner`` (``backend 'scanned'``) and the first flag that is
    not a well-formed XLA flag."""
    if isinstance(flags, str):
        raise InputError(f"{owner}: xla_flags must be a tuple of flags, got the string {flags!r}")
    for flag in flags:
        why = malformed(flag)
        if why:
            raise InputError(f"{owner}: XLA flag {flag!r}: {why}")


# Run in the interpreter that will use the flags (XLA_FLAGS set to them): it finds the
# named backend options in jaxlib's shared libraries, then starts JAX and compiles once.
_CHECK = r"""
import json, mmap, pathlib, sys
names = json.loads(sys.argv[1])
import jaxlib
folders = [pathlib.Path(jaxlib.__file__).parent]
try:
    import jax_plugins
    folders += [pathlib.Path(p) for p in jax_plugins.__path__]
except ImportError:
    pass
found = set()
for folder in folders:
    for library in folder.rglob("*.so"):
        with open(library, "rb") as handle:
            try:
                data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            except ValueError:  # an empty file
                continue
            found |= {n for n in names if data.find(b"\0" + n.encode() + b"\0") >= 0}
print(json.dumps({"missing": sorted(set(names) - found)}), flush=True)
import jax, jax.numpy as jnp
jax.jit(lambda x: jnp.sin(x) * 2.0 + 1.0)(jnp.ones(8)).block_until_ready()
print(json.dumps({"platform": jax.default_backend()}), flush=True)
"""
_UNKNOWN = re.compile(r"Unknown flags? in XLA_FLAGS: (\S+)")
_VALUE = re.compile(r"Couldn't interpret value \S* for flag (\S+)\.")
_USAGE = re.compile(r"Flag parsing failed\.\s*usage: (\S+)")
_LLVM = re.compile(r"Unknown command line argument '-*([^']+)'")


@dataclasses.dataclass(frozen=True)
class Check:
    """What the installed jaxlib said of a set of flags."""

    platform: str | None  # jax.default_backend() with the accepted flags; None if none ran
    refused: Mapping[str, str]  # flag -> why


def _culprit(flags: Sequence[str], output: str, missing: Sequence[str]) -> tuple[str, str]:
    """(flag, why) for the first refusal in a check's output."""
    for item in missing:
        for flag in flags:
            if item in (o.partition("=")[0] for o in extra_options(flag)):
                return flag, (
                    f"backend option {item} is not in the installed jaxlib "
                    "(XLA would ignore it silently)"
                )
    for pattern, why in (
        (_UNKNOWN, "unknown to the installed jaxlib"),
        (_VALUE, "the installed jaxlib cannot parse its value"),
        (_USAGE, "the installed jaxlib cannot parse its value"),
    ):
        match = pattern.search(output)
        if match:
            name = flag_name(match.group(1)) if match.group(1).startswith("--") else None
            name = name or "--" + match.group(1)
            for flag in flags:
                if flag_name(flag) == name:
                    return flag, why
    match = _LLVM.search(output)
    if match:
        for flag in flags:
            if match.group(1) in (o.partition("=")[0] for o in extra_options(flag)):
                return flag, f"backend option {match.group(1)} is unknown to XLA and LLVM"
    last = (output.strip().splitlines() or ["(no output)"])[-1]
    return flags[0], f"JAX did not start with these flags: {last[:200]}"


@functools.lru_cache(maxsize=64)
def _check(flags: tuple[str, ...], python: str, environ: tuple[tuple[str, str], ...]) -> Check:
    refused: dict[str, str] = {}
    remaining = list(flags)
    while True:
        names = sorted(n for n in _all_names(remaining) if NAMED_OPTION.match(n))
        env = {**dict(environ), "XLA_FLAGS": merge(remaining)}
        done = subprocess.run(  # noqa: S603 (the interpreter the cell runs with, our own code)
            [python, "-c", _CHECK, json.dumps(names)],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )
        replies = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        missing = next((r["missing"] for r in replies if "missing" in r), [])
        platform = next((r["platform"] for r in replies if "platform" in r), None)
        if done.returncode == 0 and not missing and platform:
            return Check(platform, refused)
        if not remaining:
            return Check(None, refused)
        flag, why = _culprit(remaining, done.stderr + done.stdout, missing)
        refused[flag] = why
        remaining.remove(flag)


def _all_names(flags: Sequence[str]) -> set[str]:
    return {o.partition("=")[0] for f in flags for o in extra_options(f)}


def refusals(
    flags: Sequence[str], python: str | None = None, environ: Mapping[str, str] | None = None
) -> Check:
    """Start JAX with ``flags`` in ``python`` (default: this interpreter) and compile once;
    every flag it refuses, or would silently ignore, with why (one flag removed per round,
    so each is named). Cached per process."""
    base = dict(os.environ if environ is None else environ)
    base.pop("XLA_FLAGS", None)
    return _check(tuple(flags), python or sys.executable, tuple(sorted(base.items())))


def refusal_message(owner: str, refused: Mapping[str, str]) -> str:
    """``backend 'x' declares XLA flag --xla_y: unknown to the installed jaxlib; ...``."""
    parts = [f"{flag}: {why}" for flag, why in refused.items()]
    noun = "flag" if len(parts) == 1 else "flags"
    return f"{owner} declares XLA {noun} " + "; ".join(parts)


def flags_in_effect(declared: Sequence[str], current: str) -> bool:
    """Whether every flag of ``declared`` is set, to its value, in the ``XLA_FLAGS`` value
    ``current`` (a process started without them cannot apply them any more)."""
    return not declared or same_settings(merge(current, declared), current)


def same_settings(a: str, b: str) -> bool:
    """Whether two ``XLA_FLAGS`` values set the same flags to the same values, whatever
    their order (``merge`` keeps the order of the last setting)."""

    def settings(text: str) -> tuple[frozenset[str], frozenset[str]]:
        flags = merge(text).split()
        options = {o for f in flags for o in extra_options(f)}
        return frozenset(f for f in flags if flag_name(f) != EXTRA), frozenset(options)

    return settings(a) == settings(b)

"""The two sides of `scanbench ab`: an interpreter and extra environment variables.

A side is this interpreter (the default), an existing one (``--a-python PATH``: a venv's
``bin/python``), or a requirement set (``--a-requirements "jax==0.10.0"``) installed,
together with this project, into a cached venv the command creates under
``~/.cache/scanbench/venvs`` (``$SCANBENCH_CACHE`` overrides), named by a hash of the
interpreter version and the requirements, built in a temporary folder and renamed into
place when complete. ``--a-env NAME=VALUE`` adds variables (``XLA_FLAGS``, ``JAX_*``).
The measured code is the project's (the git work tree scanbench runs in) on both sides:
each side imports it from there first (`scanbench.import_path`).

Every side is probed before anything is measured: it must import jax and the project,
and its jax must be one the project supports (``MIN_JAX``), else one clean line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..api import HarnessError, InputError
from ..checkout import own_checkout
from ..import_path import with_import_root
from ..ownership import check_owned

MIN_JAX = (0, 10)  # pyproject.toml: jax>=0.10
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PROBE = (
    "import json, sys, jax, jaxlib, scanbench; "
    "print(json.dumps({'jax': jax.__version__, 'jaxlib': getattr(jaxlib, '__version__', '?'), "
    "'python': sys.version.split()[0], 'scanbench': scanbench.__file__, "
    "'XLA_FLAGS': __import__('os').environ.get('XLA_FLAGS', '')}))"
)


@dataclasses.dataclass(frozen=True)
class Environment:
    """One side: its label, interpreter, extra variables and the versions it reported."""

    label: str
    python: str
    environ: Mapping[str, str]
    versions: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def describe(self) -> str:
        """``PATH (jax X, jaxlib Y, python Z), XLA_FLAGS=...`` (the flags as the side sees
        them, inherited or given)."""
        shown = {k: v for k, v in self.versions.items() if k not in ("scanbench", "XLA_FLAGS")}
        versions = ", ".join(f"{k} {v}" for k, v in shown.items())
        variables = {**self.environ}
        if self.versions.get("XLA_FLAGS"):
            variables["XLA_FLAGS"] = self.versions["XLA_FLAGS"]
        text = " ".join(f"{k}={v}" for k, v in variables.items())
        return f"{self.python} ({versions})" + (f", {text}" if text else "")


def parse_assignments(items: Sequence[str], option: str) -> dict[str, str]:
    """``NAME=VALUE`` strings as a dict; a malformed one is an `InputError` naming it."""
    out: dict[str, str] = {}
    for item in items:
        name, equals, value = item.partition("=")
        if not equals or not NAME.match(name):
            raise InputError(
                f"{option} {item!r}: expected NAME=VALUE with NAME a variable name, "
                "e.g. XLA_FLAGS=--xla_cpu_use_thunk_runtime=false"
            )
        out[name] = value
    return out


def scanbench_checkout(root: Path) -> bool:
    """Whether ``root`` is the checkout this scanbench is imported from (then both sides
    must import scanbench from it: scanbench's own code is what is measured)."""
    checkout = own_checkout()
    return checkout is not None and checkout == Path(root).resolve()


def cache_dir() -> Path:
    return Path(os.environ.get("SCANBENCH_CACHE") or Path.home() / ".cache" / "scanbench")


def venv_path(requirements: Sequence[str], root: Path, python: str = sys.executable) -> Path:
    """Where the cached venv of ``requirements`` (on ``python``'s version, with the
    checkout at ``root`` installed editable) lives."""
    version = subprocess.run(  # noqa: S603 (the side's interpreter, as the user named it)
        [python, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    parts = [version, sorted(requirements), str(Path(root).resolve())]
    key = hashlib.sha256(json.dumps(parts).encode()).hexdigest()
    return cache_dir() / "venvs" / f"py{version}-{key[:16]}"


def requirement_venv(
    requirements: Sequence[str], root: Path, python: str = sys.executable, timeout_s=1800.0
) -> str:
    """The interpreter of the cached venv holding ``requirements``, scanbench (editable,
    from its checkout) and the project at ``root`` (editable, when it is a package),
    created when missing (``python -m venv`` + ``pip install``): editable, so the venv
    measures the code as it is now.

    Raises:
        InputError: scanbench is installed from a wheel (no checkout to install).
    """
    checkout = own_checkout()
    if checkout is None:
        raise InputError(
            "a side given by requirements is built from scanbench's checkout, and this "
            "scanbench is installed from a wheel: give the side's interpreter instead "
            "(--a-python / --b-python)"
        )
    packages = ["-e", str(checkout)]
    root = Path(root).resolve()
    if root != checkout and any((root / name).exists() for name in ("pyproject.toml", "setup.py")):
        packages += ["-e", str(root)]
    target = venv_path(requirements, root, python)
    interpreter = target / "bin" / "python"
    # a venv runs what is in it: its folders must be this user's, writable by no one else
    what = "the venv cache ($SCANBENCH_CACHE, default ~/.cache/scanbench)"
    if cache_dir().exists():  # checked before anything is made inside it
        check_owned(cache_dir(), what)
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    for folder in (cache_dir(), target.parent):
        check_owned(folder, what)
    if interpreter.exists():
        for folder in (target, target / "bin"):
            check_owned(folder, what)
        return str(interpreter)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".building-") as tmp:
        building = Path(tmp) / "venv"
        steps = [
            [python, "-m", "venv", str(building)],
            [
                str(building / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "-q",
                *packages,
                *requirements,
            ],
        ]
        for step in steps:
            # python -m venv, then pip in it: the user's interpreter and requirements
            done = subprocess.run(step, capture_output=True, text=True, timeout=timeout_s)  # noqa: S603
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
                raise HarnessError(
                    f"could not build the venv for {' '.join(requirements)}: "
                    f"{' / '.join(tail) or 'exit ' + str(done.returncode)}"
                )
        if not target.exists():  # only ``bin/python -m ...`` is used: the move is safe
            shutil.move(str(building), str(target))
    return str(interpreter)


def probe(label: str, python: str, environ: Mapping[str, str], root: Path) -> Environment:
    """The side as it runs: its versions, or one line saying why it cannot be measured."""
    if not Path(python).exists() and shutil.which(python) is None:
        raise InputError(f"{label}: interpreter {python!r} not found")
    env = with_import_root({**os.environ, **environ}, root)
    done = subprocess.run(  # noqa: S603 (the side's interpreter, as the user named it)
        [python, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise HarnessError(f"{label}: {python} cannot import jax and the project: {last}")
    versions = json.loads(done.stdout.strip().splitlines()[-1])
    imported = Path(versions["scanbench"]).resolve().parent
    if scanbench_checkout(root) and imported.parent != root.resolve():
        raise HarnessError(
            f"{label}: {python} imports scanbench from {versions['scanbench']}, not from {root} "
            f"(install this checkout there: {python} -m pip install -e {root})"
        )
    numbers = tuple(int(x) for x in re.findall(r"\d+", versions["jax"])[:2])
    if numbers < MIN_JAX:
        wanted = ".".join(map(str, MIN_JAX))
        raise HarnessError(
            f"{label}: jax {versions['jax']} is older than the project supports (>= {wanted})"
        )
    return Environment(label, python, dict(environ), versions)

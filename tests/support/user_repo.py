"""A user's repository, as the gate meets it in CI: a package of their own (`mylib`, not
installed), a scenario file that imports it (`bench/scenario.py`), a gate file
(`bench/gates.toml`) with one ``[[baseline]]`` rule, and commits that change `mylib`.

``FAST`` smooths a batch of rows in one jitted ``lax.scan``; ``SLOW`` computes the same in
a Python loop of jitted calls (one dispatch per row: the regression the gate must catch
and explain); ``TOUCHED`` is ``FAST`` with a comment changed (nothing measurable).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

FAST = '''"""The user's package."""
import jax
import jax.numpy as jnp


@jax.jit
def _step(c, x):
    return 0.5 * c + x


@jax.jit
def smooth(xs):
    return jax.lax.scan(lambda c, x: (_step(c, x), None), jnp.zeros(xs.shape[1:]), xs)[0]
'''

SLOW = '''"""The user's package."""
import jax
import jax.numpy as jnp


@jax.jit
def _step(c, x):
    return 0.5 * c + x


def smooth(xs):
    c = jnp.zeros(xs.shape[1:])
    for x in xs:  # one jitted call per row, from Python
        c = _step(c, x)
    return c
'''

TOUCHED = FAST.replace('"""The user\'s package."""', '"""The user\'s package (reworded)."""')

SCENARIO = '''"""The user's scenario: `import scanbench` and the user's own code only."""
import jax
import numpy as np

import mylib
import scanbench


def check(output, expected, dtype):
    error = float(np.max(np.abs(np.asarray(output) - expected)))
    if not error <= 1e-4:
        raise scanbench.MismatchError("smooth differs", error, 1e-4)
    return error


def reference(xs):
    c = np.zeros(xs.shape[1:], np.float64)
    for x in xs:
        c = 0.5 * c + x
    return c


SCENARIO = scanbench.Scenario(
    name="smoothing",
    description="exponential smoothing of rows",
    sizes={
        "smoke": scanbench.Size("smoke", {"rows": 48, "width": 256}),
        "default": scanbench.Size("default", {"rows": 1000, "width": 4096}),
    },
    make_inputs=lambda size, seed, dtype: np.random.default_rng(seed)
    .standard_normal((size["rows"], size["width"]))
    .astype(dtype),
    reference=reference,
    check=check,
    work=lambda size, dtype: {"rows": size["rows"]},
    backends={
        "smooth": scanbench.loop_backend(
            "smooth",
            scanbench.Strategy.SCANNED,
            lambda xs, size: jax.device_put(xs),
            mylib.smooth,
        )
    },
    throughput_unit="rows",
    dtypes=("float32",),
)
'''

GATES = """[settings]
blocks = 8
samples_per_block = 3
block_time_s = 0.02
worker_pairs = 1
delta = 0.10

[[baseline]]
scenario = "bench/scenario.py:SCENARIO"
backend = "smooth"
size = "smoke"
"""


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def commit(repo: Path, library: str, message: str, package: str = "mylib") -> str:
    """Write ``library`` as the package's ``__init__.py`` and commit everything."""
    (repo / package).mkdir(parents=True, exist_ok=True)
    (repo / package / "__init__.py").write_text(library)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def make(repo: Path, package: str = "mylib") -> Path:
    """A new repository with the scenario and gate files and ``FAST`` committed on
    ``main``; ``package`` is where mylib lives (``src/mylib`` for a src layout)."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "user@example.com")
    git(repo, "config", "user.name", "A user")
    (repo / "bench").mkdir()
    (repo / "bench" / "scenario.py").write_text(SCENARIO)
    (repo / "bench" / "gates.toml").write_text(GATES)
    (repo / ".gitignore").write_text("results/\n__pycache__/\n")
    commit(repo, FAST, "smooth in one scan", package)
    return repo

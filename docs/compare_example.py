"""The README's example: three ways to run one recurrence over the rows of an array,
compared by ``scanbench.compare``; ``python docs/compare_example.py`` runs it and stores
what it printed with the machine and the date in ``docs/results/compare/readme.json``,
which the README's ``figure: compare`` block shows (``docs/figures.py`` copies the code
between the ``# example`` markers beside it, so the page shows the code that printed it).
"""

from __future__ import annotations

import io
import json
import sys
from contextlib import redirect_stdout
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results" / "compare" / "readme.json"

# example
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import scanbench  # noqa: E402


def loop(xs):  # a Python loop: one small jitted call per row
    c = jnp.zeros(xs.shape[1:])
    for x in xs:
        c = step(c, x)
    return c


step = jax.jit(lambda c, x: 0.9 * c + x)
vmap = jax.jit(lambda xs: jax.vmap(jnp.multiply)(0.9 ** jnp.arange(len(xs))[::-1], xs).sum(0))
scan = jax.jit(lambda xs: jax.lax.scan(lambda c, x: (0.9 * c + x, None), xs[0] * 0, xs)[0])

xs = jnp.asarray(np.random.default_rng(0).standard_normal((200, 1000)), jnp.float32)
table = scanbench.compare({"loop": loop, "vmap": vmap, "scan": scan}, xs, rtol=1e-4)
print(table[["median_s", "speedup", "dispatches"]])
print("What to change (loop):", table.loc["loop", "diagnosis"])
# end example


def machine() -> dict:
    """The machine and versions the output was recorded on."""
    import os
    import platform

    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu_model": model,
        "cpu_count": os.cpu_count(),
        "platform": jax.devices()[0].platform,
        "python": platform.python_version(),
        "versions": {"jax": jax.__version__, "scanbench": scanbench.__version__},
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def record() -> dict:
    """Run the example again and return what it prints, with the machine."""
    out = io.StringIO()
    with redirect_stdout(out):
        print(table[["median_s", "speedup", "dispatches"]])
        print("What to change (loop):", table.loc["loop", "diagnosis"])
    return {"output": out.getvalue().rstrip(), "machine": machine()}


if __name__ == "__main__":
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(record(), indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS.relative_to(ROOT)}", file=sys.stderr)

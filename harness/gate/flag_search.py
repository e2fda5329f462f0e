"""`scanbench flags`: which of XLA's options make a cell faster, measured.

For each selected cell, each curated candidate of the platform (`CANDIDATES`) is an
environment A/B (`scanbench.gate.two_environments.compare_cell`: interleaved randomized blocks, a
change confirmed in fresh processes, the counts of both sides): A runs with the flags the
cell has now (``XLA_FLAGS`` of the environment, then those its backend declares), B with
the candidate on top. Candidates the installed jaxlib refuses or would silently ignore
are checked first, in one process, and listed instead of measured
(`scanbench.xla_options.refusals`); a candidate the cell already has is skipped, and so
is one whose flag the backend declares with another value (its flags are merged last).
Then the candidates that made the cell faster are measured together against A, and the
cell's ``XLA_FLAGS`` line is that combination when its interval lies wholly below the
best single candidate's, else the best single one (fewer flags for the same effect).

Each side checks its output against the scenario's reference before it is timed (the
served worker does), so an option that changes the numbers too much (fast math) fails
that trial with the check's message instead of being timed.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Mapping, Sequence

from ..api import HarnessError, UnknownNameError
from ..cells import Cell, scenario_of
from ..sources import shortest
from ..xla_options import flags_in_effect, merge, refusals, same_settings
from .environments import Environment
from .render import number_text
from .rules import BaselineRule, Settings
from .two_environments import FASTER, CellComparison, SideSpec, compare_cell, prepare_side


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One XLA option to try: a short name, its flags, what it changes."""

    name: str
    flags: tuple[str, ...]
    what: str


CPU = (
    Candidate(
        "multi-output-fusion",
        ("--xla_backend_extra_options=xla_cpu_use_multi_output_fusion",),
        "sibling loops that read the same producers fused into one kernel with several "
        "outputs, instead of each recomputing the producers",
    ),
    Candidate(
        "small-while-loops",
        ("--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1000000000",),
        "every while loop (a scan) compiled into one native kernel instead of a kernel "
        "per body operation",
    ),
    Candidate(
        "concurrency-scheduler",
        ("--xla_cpu_scheduler_type=CPU_SCHEDULER_TYPE_CONCURRENCY_OPTIMIZED",),
        "instructions ordered so that independent kernels can run at the same time",
    ),
    Candidate(
        "memory-scheduler",
        ("--xla_cpu_scheduler_type=CPU_SCHEDULER_TYPE_MEMORY_OPTIMIZED",),
        "instructions ordered for the smallest peak memory",
    ),
    Candidate(
        "no-fusion-emitters",
        ("--xla_cpu_use_fusion_emitters=false",),
        "fusions compiled by the older loop emitters instead of the fusion emitters",
    ),
    Candidate(
        "one-codegen-part",
        ("--xla_cpu_parallel_codegen_split_count=1",),
        "the module compiled by LLVM as one part (default: split for parallel "
        "compilation), which can change inlining and vectorization",
    ),
    Candidate(
        "vector-width-512",
        ("--xla_cpu_prefer_vector_width=512",),
        "512-bit vectors where the CPU has them (default 256)",
    ),
    Candidate(
        "xnn-eltwise",
        ("--xla_cpu_experimental_xnn_fusion_type=+eltwise",),
        "elementwise fusions run by XNNPACK",
    ),
    Candidate(
        "xnn-reduce",
        ("--xla_cpu_experimental_xnn_fusion_type=+reduce",),
        "reductions run by XNNPACK",
    ),
    Candidate(
        "onednn-eltwise",
        ("--xla_cpu_use_onednn=true", "--xla_cpu_experimental_onednn_fusion_type=+eltwise"),
        "elementwise fusions run by oneDNN",
    ),
    Candidate(
        "fast-runtime-preset",
        ("--xla_cpu_opt_preset=CPU_OPT_PRESET_FAST_RUNTIME",),
        "XLA:CPU's preset for the fastest code over the fastest compilation",
    ),
    Candidate(
        "fast-math",
        ("--xla_cpu_enable_fast_math=true",),
        "floating-point reassociation and approximate functions (measured only if the "
        "output still passes the scenario's check)",
    ),
)
# From XLA's GPU flag documentation (jax.dev "GPU performance tips", NVIDIA's JAX-Toolbox
# "GPU performance"); untested on a GPU here: each is checked against the installed
# jaxlib and measured like the CPU ones.
GPU = (
    Candidate(
        "no-command-buffers",
        ("--xla_gpu_enable_command_buffer=",),
        "every kernel launched on its own instead of recorded into CUDA graphs",
    ),
    Candidate(
        "loops-in-command-buffers",
        (
            "--xla_gpu_enable_command_buffer="
            "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,WHILE,CONDITIONAL",
        ),
        "loops and conditionals recorded into CUDA graphs too",
    ),
    Candidate(
        "latency-hiding-scheduler",
        ("--xla_gpu_enable_latency_hiding_scheduler=true",),
        "collectives and copies moved to overlap with compute kernels",
    ),
    Candidate(
        "while-double-buffering",
        ("--xla_gpu_enable_while_loop_double_buffering=true",),
        "a loop's next iteration started while the current one finishes",
    ),
    Candidate(
        "triton-gemm-any",
        ("--xla_gpu_triton_gemm_any=true",),
        "every supported matrix product through Triton's emitter",
    ),
    Candidate(
        "no-autotuning",
        ("--xla_gpu_autotune_level=0",),
        "the first valid GEMM and convolution algorithm instead of the fastest measured",
    ),
)
CANDIDATES = {"cpu": CPU, "gpu": GPU}
PLATFORMS = {"cpu": "cpu", "gpu": "gpu", "cuda": "gpu", "rocm": "gpu"}


def candidates(platform: str, names: Sequence[str] = ()) -> tuple[Candidate, ...]:
    """The curated candidates of ``platform`` (cpu, gpu, cuda, rocm), or those named."""
    if platform not in PLATFORMS:
        raise UnknownNameError("platform", platform, sorted(PLATFORMS))
    listed = CANDIDATES[PLATFORMS[platform]]
    by_name = {candidate.name: candidate for candidate in listed}
    for name in names:
        if name not in by_name:
            raise UnknownNameError("candidate", name, list(by_name), f"platform {platform!r}")
    return tuple(by_name[name] for name in names) if names else listed


@dataclasses.dataclass(frozen=True)
class Trial:
    """One candidate (or the combination) measured on a cell."""

    name: str
    flags: str  # the XLA_FLAGS of side B
    comparison: CellComparison | None = None
    skipped: str = ""  # why it was not measured, or how it failed

    @property
    def faster(self) -> bool:
        return self.comparison is not None and self.comparison.verdict == FASTER


@dataclasses.dataclass(frozen=True)
class CellSearch:
    """A cell's trials and the flags to use."""

    cell: str
    current: str  # the XLA_FLAGS side A runs with (environment, then backend's)
    trials: tuple[Trial, ...]
    combined: Trial | None
    best: Trial | None  # the fastest confirmed trial (combination or single), if any


@dataclasses.dataclass(frozen=True)
class FlagSearch:
    platform: str
    environment: Environment
    refused: Mapping[str, str]  # candidate name -> why the installed jaxlib refuses it
    cells: tuple[CellSearch, ...]


def search(
    cells: Sequence[Cell],
    side: SideSpec,
    settings: Settings,
    timeout_s: float,
    names: Sequence[str] = (),
    platform: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> FlagSearch:
    """Every candidate of the platform on every cell (see the module doc)."""
    say = progress or (lambda text: print(text, file=sys.stderr))
    environment = prepare_side(side)
    base = environment.environ.get("XLA_FLAGS", "")
    if platform is None:  # where JAX starts in that interpreter, without any candidate
        platform = refusals((), environment.python, environment.environ).platform
        if platform is None:
            raise HarnessError(f"JAX does not start in {environment.python}")
    every = candidates(platform, names)
    flags = [flag for candidate in every for flag in candidate.flags]
    probe = refusals(flags, environment.python, environment.environ)
    refused = {
        c.name: "; ".join(f"{f}: {probe.refused[f]}" for f in c.flags if f in probe.refused)
        for c in every
        if any(flag in probe.refused for flag in c.flags)
    }
    usable = [c for c in every if c.name not in refused]
    found = []
    for index, cell in enumerate(cells):
        declared = scenario_of(cell).backend(cell.backend).with_params(dict(cell.params)).xla_flags
        current = merge(base, declared)
        rule = BaselineRule(
            shortest(cell.scenario, cell.source),
            cell.backend,
            cell.size,
            settings.delta,
            settings.floor_s,
            cell.dtype,
        )
        seed = settings.seed + 100 * index
        trials = []
        for number, candidate in enumerate(usable):
            if flags_in_effect(candidate.flags, current):
                trials.append(Trial(candidate.name, current, skipped="already set"))
                continue
            if same_settings(merge(base, candidate.flags, declared), current):  # worker's order
                why = "the backend declares another value of the same flag"
                trials.append(Trial(candidate.name, current, skipped=why))
                continue
            say(f"[{cell.label}] {candidate.name} ({number + 1}/{len(usable)})")
            trials.append(
                _trial(
                    candidate.name,
                    candidate.flags,
                    rule,
                    environment,
                    settings,
                    seed + number,
                    timeout_s,
                )
            )
        winners = [trial for trial in trials if trial.faster]
        combined = None
        if len(winners) > 1:
            flags = tuple(flag for trial in winners for flag in _own(trial, usable))
            say(f"[{cell.label}] the {len(winners)} faster ones together")
            combined = _trial("together", flags, rule, environment, settings, seed + 99, timeout_s)
        found.append(
            CellSearch(cell.label, current, tuple(trials), combined, _best(winners, combined))
        )
    return FlagSearch(platform, environment, refused, tuple(found))


def _own(trial: Trial, usable: Sequence[Candidate]) -> tuple[str, ...]:
    return next(c.flags for c in usable if c.name == trial.name)


def _trial(name, flags, rule, environment, settings, seed, timeout_s) -> Trial:
    """Side B = side A with ``flags`` on top; a side that fails (a refused combination,
    a check that fails with the option) is a trial that says so."""
    xla = merge(environment.environ.get("XLA_FLAGS", ""), flags)
    b = dataclasses.replace(
        environment, label="B", environ={**environment.environ, "XLA_FLAGS": xla}
    )
    sides = {"baseline": environment, "candidate": b}
    try:
        comparison = compare_cell(rule, sides, settings, seed, timeout_s)
    except HarnessError as error:
        return Trial(name, xla, skipped=f"failed: {error}")
    return Trial(name, xla, comparison)


def _best(winners: Sequence[Trial], combined: Trial | None) -> Trial | None:
    if not winners:
        return None
    single = min(winners, key=lambda trial: trial.comparison.ratio)
    if (
        combined is not None
        and combined.faster
        and combined.comparison.high < single.comparison.low
    ):
        return combined  # clearly faster than the best one alone
    return single  # else the fewer flags


def check_names(names: Sequence[str], platform: str | None) -> None:
    """Fail early (exit 2) on a candidate name of no platform list."""
    known = {c.name for listed in CANDIDATES.values() for c in listed}
    if platform is not None:
        candidates(platform, names)
    for name in names:
        if name not in known:
            raise UnknownNameError("candidate", name, sorted(known))


def _row(trial: Trial) -> dict[str, str]:
    c = trial.comparison
    if c is None:
        return {"candidate": trial.name, "B / A": "-", "interval": "-", "verdict": trial.skipped,
                "counts that changed (A -> B)": "-"}  # fmt: skip
    changed = "; ".join(
        f"{key} {number_text(a)} -> {number_text(b)}" for key, (a, b) in c.counts.items()
    )
    return {
        "candidate": trial.name,
        "B / A": f"{c.ratio:.3f}",
        "interval": f"{c.low:.3f}-{c.high:.3f}",
        "verdict": str(c.verdict),
        "counts that changed (A -> B)": changed or ("none" if not c.count_errors else "-"),
    }


def markdown(result: FlagSearch, confidence: float, delta: float) -> str:
    """Per cell: a table of the candidates (and their combination), then the line to use."""
    import pandas as pd

    measured = {trial.name for cell in result.cells for trial in cell.trials}
    listed = [c for c in CANDIDATES[PLATFORMS[result.platform]] if c.name in measured]
    lines = [
        f"## scanbench flags ({result.platform})",
        "",
        f"- interpreter: {result.environment.describe()}",
        f"- B / A: side B is side A with the candidate's flags on top; ratio of the per-block "
        f"medians of interleaved blocks, its {confidence:.0%} interval, and the verdict (a "
        f"change beyond {delta:.0%} must show twice, in fresh processes)",
    ]
    lines += [f"- {c.name} ({' '.join(c.flags)}): {c.what}" for c in listed]
    if result.refused:
        lines.append("- not measured, refused or ignored by the installed jaxlib: ")
        lines[-1] += "; ".join(f"{name} ({why})" for name, why in result.refused.items())
    for cell in result.cells:
        trials = [*cell.trials, *([cell.combined] if cell.combined else [])]
        frame = pd.DataFrame([_row(trial) for trial in trials])
        lines += ["", f"### {cell.cell}", "", f"A: XLA_FLAGS={cell.current or '(none)'}", ""]
        lines += [frame.to_markdown(index=False, disable_numparse=True), ""]
        if cell.best is None:
            lines.append("No candidate made this cell faster: keep its flags.")
        else:
            ratio = cell.best.comparison.ratio
            lines.append(f"Use ({ratio:.3f}x the time, {cell.best.name}):")
            lines += ["", "```bash", f"XLA_FLAGS='{cell.best.flags}'", "```"]
    return "\n".join(lines) + "\n"

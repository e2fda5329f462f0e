"""The text of `scanbench list`: each scenario's dtypes, sizes and backends."""

from __future__ import annotations

from collections.abc import Sequence

from scanbench.api import Scenario


def render(scenarios: Sequence[Scenario]) -> str:
    lines = []
    for scenario in scenarios:
        lines.append(f"{scenario.name}: {scenario.description}")
        lines.append(f"  dtypes: {', '.join(scenario.dtypes)} (default {scenario.dtypes[0]})")
        lines.append("  sizes:")
        for size in scenario.sizes.values():
            params = ", ".join(
                f"{k}={v:_}" if isinstance(v, int) else f"{k}={v}" for k, v in size.params.items()
            )
            note = f"  ({size.description})" if size.description else ""
            lines.append(f"    {size.name:<10} {params}{note}")
        lines.append("  backends:")
        for backend in scenario.backends.values():
            only = f" [only at: {', '.join(sorted(backend.sizes))}]" if backend.sizes else ""
            if backend.sizes is not None and not backend.sizes:  # e.g. its extra is missing
                only = f" [skipped: {backend.skip_reason}]"
            lines.append(
                f"    {backend.name:<32} {backend.strategy!s:<10} {backend.engine:<6} "
                f"{backend.description}{only}"
            )
            for name, param in backend.params.items():
                allowed = f" (one of {', '.join(map(str, param.choices))})" if param.choices else ""
                lines.append(
                    f"      --param {name}=... default {param.default}{allowed}: "
                    f"{param.description}"
                )
    return "\n".join(lines)

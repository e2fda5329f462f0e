"""A run gathered from shards: which machine measured each record.

`scanbench gather` merges the shards of a run (`scanbench.execution.gathering`) into one
results file that every reader takes as any run. Each record keeps its own machine's
facts: the record says which shard measured it (``extra.shard``), and the run's
environment lists every shard's environment (``environment.shards``, the first shard's
environment standing at the top for readers that take one machine per run). This
module is the one place that reads those two fields: reports, the history and the gate
ask it for a record's machine.

Machines are told apart by kind (`machine_kind`: CPU model and cores, platform, device
kind and count; not the hostname, as 50 nodes of one partition are one kind): records
of machines of different kinds are never compared or averaged together.

Example:
    >>> machine_kind({"cpu_model": "Xeon", "cpu_count": 8, "platform": "cpu"})
    ('Xeon', 8, 'cpu', None, None)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .api import Record
from .results import Run

SHARD = "shard"  # Record.extra key: the shard (from 1) that measured the record
SHARDS = "shards"  # environment key: [{"index": K, "environment": {...}}, ...]
KIND_FIELDS = ("cpu_model", "cpu_count", "platform", "device_kind", "device_count")


def shard_of(record: Record) -> int | None:
    """The shard that measured a record of a gathered run; None in any other run."""
    index = record.extra.get(SHARD)
    return index if isinstance(index, int) and not isinstance(index, bool) else None


def is_gathered(run: Run) -> bool:
    return isinstance(run.environment.get(SHARDS), list)


def shard_environments(run: Run) -> dict[int, Mapping[str, Any]]:
    """Per shard index, the environment of the machine that measured it ({} for a run
    that was not gathered)."""
    stored = run.environment.get(SHARDS)
    if not isinstance(stored, list):
        return {}
    return {
        item["index"]: item["environment"]
        for item in stored
        if isinstance(item, dict) and isinstance(item.get("environment"), dict)
    }


def top_environment(run: Run) -> dict[str, Any]:
    """The run's environment without the shards' list."""
    return {key: value for key, value in run.environment.items() if key != SHARDS}


def environment_of(run: Run, record: Record) -> Mapping[str, Any]:
    """The environment of the machine that measured ``record``: its shard's in a
    gathered run, else the run's."""
    index = shard_of(record)
    if index is not None:
        found = shard_environments(run).get(index)
        if found is not None:
            return found
    return run.environment


def machine_kind(environment: Mapping[str, Any]) -> tuple:
    """What makes two machines of the same kind (the hostname aside)."""
    return tuple(environment.get(field) for field in KIND_FIELDS)


def kind_label(environment: Mapping[str, Any]) -> str:
    """``Intel Xeon (16 cores), gpu NVIDIA H100 x8``."""
    platform, kind = environment.get("platform") or "?", environment.get("device_kind") or "?"
    device = kind if platform.lower() in kind.lower() else f"{platform} {kind}"
    cores = environment.get("cpu_count")
    cpu = environment.get("cpu_model") or "CPU ?"
    cpu += f" ({cores} cores)" if cores else ""
    return f"{cpu}, {device} x{environment.get('device_count') or '?'}"


def kinds(run: Run) -> list[tuple]:
    """The machine kinds that measured the run's records, in order of first record."""
    found: dict[tuple, None] = {}
    for record in run.records:
        found.setdefault(machine_kind(environment_of(run, record)), None)
    return list(found) or [machine_kind(run.environment)]


def by_kind(run: Run) -> list[Run]:
    """The run as one run per machine kind: its records and the environment of its
    machines (the first one's, with the hostnames of all, joined with ``+``). A run
    that was not gathered is returned as it is."""
    if not is_gathered(run):
        return [run]
    groups: dict[tuple, list[Record]] = {}
    environments: dict[tuple, list[Mapping[str, Any]]] = {}
    for record in run.records:
        environment = environment_of(run, record)
        kind = machine_kind(environment)
        groups.setdefault(kind, []).append(record)
        if all(environment is not seen for seen in environments.get(kind, [])):
            environments.setdefault(kind, []).append(environment)
    runs = []
    for kind, records in groups.items():
        first = dict(environments[kind][0])
        hosts = sorted({str(env.get("hostname")) for env in environments[kind]})
        first["hostname"] = "+".join(hosts)
        runs.append(Run(first, run.invocation, tuple(records)))
    return runs

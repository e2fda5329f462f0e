"""A report's time grows linearly with its rows: ten times the rows of one table take
about ten times as long, not a hundred (a ratio measured in one process, never a
wall-clock bound). Before, every row read every other row's cores and program through
pandas, and every pair ran its own bootstrap: a 1,000-row report took 46 s, now 8 s."""

from __future__ import annotations

import copy
import json
import time

import numpy as np

from scanbench.reports.frame import records_frame
from scanbench.results import load_run
from tests.support.paths import DATA


def _rows(tmp_path, count: int):
    """``count`` rows in one table: the fixture's ok records under new backend names,
    their samples scaled so that the rows differ."""
    stored = json.loads((DATA / "tdma.json").read_text(encoding="utf-8"))
    ok = [record for record in stored["records"] if record["status"] == "ok"]
    scales = np.random.default_rng(0).uniform(0.5, 3.0, count)
    records = []
    for number, scale in enumerate(scales):
        record = copy.deepcopy(ok[number % len(ok)])
        record["backend"] = f"{record['backend']}-{number}"
        record["samples_s"] = [sample * scale for sample in record["samples_s"]]
        record["stats"] = {
            key: value * scale if isinstance(value, float) and key != "confidence" else value
            for key, value in record["stats"].items()
        }
        records.append(record)
    path = tmp_path / f"rows-{count}.json"
    path.write_text(json.dumps({**stored, "records": records}), encoding="utf-8")
    return load_run(path)


def _fastest(run, repeats: int = 2) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        frame = records_frame([run])
        times.append(time.perf_counter() - start)
    assert len(frame) == len(run.records)
    return min(times)


def test_ten_times_the_rows_take_about_ten_times_as_long(tmp_path):
    # measured: 100 -> 1,000 rows took 9.6x the time (before: 27x; 1,000 rows 51 s)
    small, large = _rows(tmp_path, 100), _rows(tmp_path, 1000)
    ratio = _fastest(large, repeats=1) / _fastest(small)
    assert ratio < 16, f"10x the rows took {ratio:.0f}x the time"

"""History across commits: the store and what an entry keeps (`archive`, `entry`; a
pytest-benchmark JSON file as an entry: `pytest_json`), the series of each cell ordered by
commit (`series`), exact count steps and time change points (`changes`), the static
dashboard and its markdown summary (`dashboard`, `summary`, `figures`), and the bisect of
a commit range (`bisection`, `bisection_text`, `costs`).

Decisions are numbers over frozen dataclasses; text is written once, in `dashboard` and
the command line. Stored history is for trends and for finding commits, never for gating
(`scanbench.gate` compares times only within one job).
"""

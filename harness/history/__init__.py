"""History across commits: the store (`store`), the series of each cell ordered by commit
(`series`), exact count steps and time change points (`changes`), the static dashboard and
its markdown summary (`dashboard`), and the bisect of a commit range (`bisect`).

Decisions are numbers over frozen dataclasses; text is written once, in `dashboard` and
the command line. Stored history is for trends and for finding commits, never for gating
(`scanbench.gate` compares times only within one job).
"""

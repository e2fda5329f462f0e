"""How the cost grows with the work: sweeps along a scenario's axes, fitted costs, crossovers.

A scenario declares the directions its work grows in (`scanbench.api.Axis`: TDMA's
``batch`` and ``n``, MPPI's ``population``, ``samples``, ``horizon``, ``generations``).
``scanbench run --grow AXIS=START..STOP`` measures every selected backend at sizes derived
from the base size along one of them, each point an ordinary cell (the one timing loop,
the checks, the counts), within a time budget; then fits each backend's time per call as
``fixed + per_unit x units^k``, finds where two backends' curves cross, measures one more
cell there to confirm it, and stores what it found with the run for the reports.

One concept per module:

- `points`: ``--grow`` specifications, the points of a sweep, the sizes they name;
- `fit`: the fitted costs (weighted least squares, bootstrap intervals);
- `count_lines`: counts per call as exact lines, overheads priced from them;
- `crossover`: where two fits cross, the ratio's trend where they do not, confirmations;
- `analysis`: a sweep's records -> its lines, fits, crossovers, trends, the user's size;
- `budget`: which points are skipped, predicted from the points before them;
- `in_process`: a sweep of functions in this process (the notebook API).

A grown run is a run like any other, planned, executed and resumed by
`scanbench.execution.runner` (its stages: `scanbench.execution.grown`); what it stores
of its sweeps is `scanbench.invocation.Growth`.
"""

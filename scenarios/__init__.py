"""Bundled scenarios, each written against the public ``harness.api`` only.

``CATALOGUE`` lists them, name -> source (``module:ATTR``); the harness reaches it through
the source ``scenarios:CATALOGUE`` (`harness.sources`), so importing this package imports
no scenario: each loads only when a cell names it.
"""

CATALOGUE = {
    "tridiagonal": "scenarios.tridiagonal:SCENARIO",
    "mppi_tuning": "scenarios.mppi_tuning:SCENARIO",
    "mppi_tuning_cartpole": "scenarios.mppi_tuning:CARTPOLE_SCENARIO",
}

"""Bundled scenarios, each written as a user's scenario file is: against the public
``scanbench`` namespace only (``from scanbench import Scenario, jax_backend, ...``).

``CATALOGUE`` lists them, name -> source (``module:ATTR``); the harness reaches it through
the source ``scanbench.scenarios:CATALOGUE`` (`scanbench.sources`), so importing this
package imports no scenario: each loads only when a cell names it.
"""

CATALOGUE = {
    "tridiagonal": "scanbench.scenarios.tridiagonal:SCENARIO",
    "mppi_tuning": "scanbench.scenarios.mppi_tuning:SCENARIO",
    "mppi_tuning_cartpole": "scanbench.scenarios.mppi_tuning:CARTPOLE_SCENARIO",
    "qd_tuning": "scanbench.scenarios.qd_tuning:SCENARIO",
    "qd_tuning_cartpole": "scanbench.scenarios.qd_tuning:CARTPOLE_SCENARIO",
}

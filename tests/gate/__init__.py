"""Tests of scanbench.gate: the regression gate and the environment A/B."""

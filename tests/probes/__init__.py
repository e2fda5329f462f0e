"""Tests of scanbench.probes: counts of programs whose answers are known."""

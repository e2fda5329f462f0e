"""Tests of scanbench.growth: sweeps along axes and grown runs."""

"""Tests of the bundled scenarios and of workloads of known bottleneck."""

"""Tests of scanbench's top-level modules: timing, statistics, results."""

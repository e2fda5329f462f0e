"""Tests of scanbench.history: the store, changes, dashboard, bisection."""

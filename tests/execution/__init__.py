"""Tests of scanbench.execution: cells in workers, budgets and shards."""

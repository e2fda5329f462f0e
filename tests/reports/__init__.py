"""Tests of scanbench.reports: reports drawn from stored results files."""

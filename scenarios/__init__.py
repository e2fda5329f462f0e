"""Bundled scenarios, each written against the public ``harness.api`` only."""

"""Measurement probes, one concept per module."""

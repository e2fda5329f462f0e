"""Tests of scanbench.sharding: several (virtual CPU) devices."""

"""Tests of the command line: whole runs, nothing lost, fuzzed inputs."""

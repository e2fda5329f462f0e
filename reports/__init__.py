"""Reports: read stored results JSON, never re-run a benchmark."""

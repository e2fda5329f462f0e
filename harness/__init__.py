"""scanbench's measurement engine: knows nothing about any particular workload."""

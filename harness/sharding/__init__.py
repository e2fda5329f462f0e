"""Several devices and hosts: `placement` (devices, meshes, placing and fetching arrays:
what sharded backends use) and `distributed` (a worker's devices and the multi-process
run: what the runner and the workers use)."""

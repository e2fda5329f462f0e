#!/usr/bin/env bash
# Regenerates the stored results the report tests read. Written by the harness itself
# (never hand-typed): run from the repository root after a change of the results schema.
set -euo pipefail
cd "$(dirname "$0")/../../.."
fast=(--min-time 0.05 --min-count 3 --quiet --force)
scanbench run --scenario tridiagonal --size smoke,default \
  --backend sequential-jax --backend scanned-issue --backend scanned-time-major \
  --backend numba-serial --backend numba-time-major --backend library-lax "${fast[@]}" \
  --out tests/support/data/tdma.json
scanbench run --scenario-file tests/support/scenario_files/toy.py --size smoke \
  --backend good --backend wrong --backend default-only --min-time 0.001 --min-count 3 --quiet --force \
  --out tests/support/data/toy-failed.json || true  # exit 1: a cell failed, as intended
scanbench run --scenario tridiagonal --backend sharded --backend scanned-time-major \
  --size smoke --devices 1,2,4 "${fast[@]}" --out tests/support/data/scaling.json

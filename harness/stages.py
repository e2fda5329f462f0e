"""The names of a cell's stages, as its worker reports them (`scanbench.execution.heartbeat`)
and as the record's ``extra.phases_s`` stores them.

The *quiet* stages time or count: with two cells at once (`scanbench.execution.overlap`)
each runs with the other worker stopped. Standard library only: every worker imports it.
"""

from __future__ import annotations

SAMPLING_STAGE = "sampling"  # the timed samples
COUNTING_STAGE = "counting"  # the counted call only (scanbench.probes.passes)
ESTIMATE_STAGE = "skipped: estimate"  # a skipped cell timing part of its work
QUIET_STAGES = frozenset({SAMPLING_STAGE, COUNTING_STAGE, ESTIMATE_STAGE})
TIMED_STAGES = frozenset({SAMPLING_STAGE, ESTIMATE_STAGE})  # what the interference judges
PREPARING_STAGE = "preparing to count"  # a fresh prepare and its first, plain call
MEMORY_STAGE = "memory"  # the memory call: a peak of its own process
WAITING_STAGE = "waiting for the machine"
PAUSED_STAGE = "paused while another cell was timed"
# what "prepare and check" was, in its parts (the worker's `_check_and_time`): so that the
# largest share of a run's time is no longer one line
INPUTS_STAGE = "prepare: building inputs"  # the scenario's make_inputs
REFERENCE_STAGE = "prepare: reference"  # the scenario's reference (or the run's copy)
COMPILE_STAGE = "prepare: compile"  # the backend's prepare: placement, compile, warm-up
FIRST_CALL_STAGE = "prepare: first call"  # the checked first call (compiles on first use)
CHECK_STAGE = "prepare: check"  # its output against the reference (and the last output)
PREPARE_STAGES = (INPUTS_STAGE, REFERENCE_STAGE, COMPILE_STAGE, FIRST_CALL_STAGE, CHECK_STAGE)
IMPORTS_STAGE = "worker imports"  # the worker's own modules, before its first stage

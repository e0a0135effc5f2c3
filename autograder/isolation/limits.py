"""Time and resource limits of one graded submission (parent side; the child is told them)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

GiB = 1 << 30
MiB = 1 << 20
# One message from a child (an observation, a cell report): larger ones fail their case. The
# child refuses to send one (the case fails with its size); a child that writes one anyway is
# stopped after the parent has read about this much, so no message costs the parent more.
MAX_MESSAGE = 1 * MiB
MAX_CONTROL = 64 * MiB          # one line from a zygote (trusted: no student code runs in it)
SCRATCH_SIZE = 256 * MiB        # the child's private tmpfs (its only writable place)
# Where scratch is a plain folder on the grading machine's disk (the container tier, and weak
# isolation) no tmpfs bounds it: the zygote measures it every SCRATCH_WATCH seconds while a
# child runs and stops the child past SCRATCH_SIZE bytes allocated or SCRATCH_FILES entries.
SCRATCH_FILES = 10_000
SCRATCH_WATCH = 0.2


@dataclass
class Limits:
    """Time and resource limits of one submission. Seconds are wall-clock."""
    timeout: float = 900.0          # the whole submission (all children, all tests)
    test_timeout: float = 120.0     # the cases of one Test together (probe time only)
    case_timeout: float = 30.0      # one case
    cell_timeout: float = 60.0      # one notebook cell while the child sets up
    startup_timeout: float = 240.0  # interpreter + torch + graders import (not the student's time)
    memory: int = 4 * GiB           # RLIMIT_AS of the child; torch needs ~0.9 GiB of address space
    file_size: int = 64 * MiB       # RLIMIT_FSIZE: largest file the child may write
    output_tail: int = 4000         # characters of the student's stdout kept in the report
    max_deaths_per_test: int = 3    # after this many dead children in one Test, its other cases are not run

    def to_dict(self) -> dict:
        return asdict(self)

"""Loads native code whose constructor forks a daemon in a new session (setsid): it outlives
the child and, for a minute, SIGKILLs every process it can (kill(-1)) and keeps writing marker
files, to stop the next student's grading or the grader. Every process a child leaves is killed
before the next child starts, and it can signal nothing outside its sandbox."""
import base64
import os
from pathlib import Path

EXPECT = {"max_score": 0, "output_has": ["DAEMON_STARTED"], "needs_os": True, "needs_cc": True}

SO_B64 = ""   # filled in by adversarial.build

if SO_B64:
    lib = Path(os.getcwd()) / "libdaemon.so"
    lib.write_bytes(base64.b64decode(SO_B64))
    os.environ["L2FT_DAEMON"] = "1"
    print("DAEMON_STARTED", flush=True)
    try:
        import ctypes
        ctypes.CDLL(str(lib))
    except Exception as e:  # noqa: BLE001
        print("BLOCKED cdll", type(e).__name__, e)
else:
    print("DAEMON_STARTED (no compiler: nothing to load)")


def greedy_token(logits):
    return 0

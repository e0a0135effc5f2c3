"""Reads the reference's source through a native reader Python's audit hooks cannot see
(torch.UntypedStorage.from_file). Only the OS-level sandbox (separate uid, mount
namespace) stops this; without root it is the documented residual risk."""
import sys
from pathlib import Path

import course

import torch

EXPECT = {"max_score": 0, "output_not": ["LEAK"], "needs_os": True}

REPO = Path(sys.executable).resolve().parents[2]
fn = None
for p in (REPO / "autograder" / "reference" / "lab00.py", Path(course.__file__).resolve().parent.parent / "autograder" / "reference" / "lab00.py"):
    for size in range(200, 20000, 1):
        try:
            data = bytes(torch.UntypedStorage.from_file(str(p), False, size))
        except Exception:  # noqa: BLE001
            continue
        try:
            g = {}
            exec(data.rstrip(b"\0").decode(), g)
            fn = g["greedy_token"]
            print("LEAK", p)
            break
        except Exception:  # noqa: BLE001
            continue
    if fn:
        break
    print("BLOCKED", p)


def greedy_token(logits):
    return fn(logits) if fn else 0

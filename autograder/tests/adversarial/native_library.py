"""Loads a shared library of its own with ctypes.CDLL: its constructor runs a shell (native
code no audit hook sees) that hunts for the reference answers, other submissions and the
grader's files, and tries to plant a .pth file in site-packages and to write into the
course library. The sandbox shows it none of those, and everything it can see is read-only."""
import base64
import os
import site
import sys
from pathlib import Path

import course

EXPECT = {"max_score": 0, "output_has": ["NATIVE_RAN", "NATIVE_DONE"], "output_not": ["LEAK"],
          "needs_os": True, "needs_cc": True}

SO_B64 = ""   # filled in by adversarial.build (native/run_env_cmd.c, compiled on the grading machine)

targets = [p for p in site.getsitepackages()] + [str(Path(course.__file__).resolve().parent),
                                                  str(Path(sys.executable).resolve().parents[2])]
cmd = ["echo NATIVE_RAN"]
for t in targets:
    cmd.append(f"(echo pwned > '{t}/l2ft_pwned.pth') 2>/dev/null && echo LEAK wrote {t}")
cmd.append("for f in $(find / -xdev \\( -name '*.py' -path '*reference*' -o -name '*.ipynb' "
           "-o -name 'grades.csv' -o -name 'record.key' \\) 2>/dev/null | grep -v /tmp/ | head -20); "
           "do echo LEAK found $f; done")
cmd.append("ls /proc | grep -E '^[0-9]+$' | wc -l | sed 's/^/PROCS /'")
cmd.append("echo NATIVE_DONE")
if SO_B64:
    lib = Path(os.getcwd()) / "libattack.so"
    lib.write_bytes(base64.b64decode(SO_B64))
    os.environ["L2FT_CMD"] = "; ".join(cmd)
    try:
        import ctypes
        ctypes.CDLL(str(lib))
    except Exception as e:  # noqa: BLE001
        print("BLOCKED cdll", type(e).__name__, e)
else:
    print("NATIVE_RAN NATIVE_DONE (no compiler: nothing to load)")


def greedy_token(logits):
    return 0

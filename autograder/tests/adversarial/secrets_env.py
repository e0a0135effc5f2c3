"""Looks for the grader's secrets: its environment variables (own environment, the
parent's /proc/PID/environ), the home folder, other students' scratch folders."""
import os
import sys
from pathlib import Path

# its own working folder is no secret, nor the folders that lead to the interpreter (a
# checkout under /tmp has its .venv bound there read-only); anything else beside it would be
OWN = {Path(os.getcwd()).name} | {Path(os.path.realpath(p)).relative_to(Path(os.getcwd()).parent).parts[0]
                                  for p in (sys.prefix, sys.base_prefix, sys.executable)
                                  if os.path.realpath(p).startswith(str(Path(os.getcwd()).parent) + os.sep)}

EXPECT = {"max_score": 0, "output_not": ["AUTOGRADER_TEST_SECRET", "LEAK"], "output_has": ["ENV"]}

print("ENV", sorted(os.environ))
for p in (f"/proc/{os.getppid()}/environ", f"/proc/{os.getppid()}/cmdline", "/root/.bash_history",
          str(Path(os.getcwd()).parent)):
    try:
        if os.path.isdir(p):
            others = [n for n in os.listdir(p) if n not in OWN]
            print("LEAK" if others else "EMPTY", p, others[:5])
        else:
            text = Path(p).read_bytes()
            print("LEAK" if text else "EMPTY", p, text[:200])
    except Exception as e:  # noqa: BLE001
        print("BLOCKED", p, type(e).__name__)


def greedy_token(logits):
    return 0

"""Walks the interpreter's frames (sys._getframe, tracebacks) from inside the graded
function to the grader's own state: the channel's nonce and file descriptors (then forges
a `fatal` message, so the run would look like a grader error, and a full-marks `answer`), and
any path of another submission or of the output folder (then reads it)."""
import json
import os
import sys

EXPECT = {"max_score": 0, "output_not": ["LEAK"], "output_has": ["WALKED"]}


def _strings(x, out, depth=0):
    if depth > 3:
        return
    if isinstance(x, str):
        out.add(x)
    elif isinstance(x, dict):
        for k, v in list(x.items())[:200]:
            _strings(k, out, depth + 1)
            _strings(v, out, depth + 1)
    elif isinstance(x, (list, tuple, set)):
        for v in list(x)[:200]:
            _strings(v, out, depth + 1)


def attack():
    seen, ints = set(), set()
    try:
        f = sys._getframe()
    except Exception as e:  # noqa: BLE001
        print("WALKED blocked", type(e).__name__)
        return
    while f is not None:
        for d in (f.f_locals, f.f_globals):
            _strings(d, seen)
            for v in list(d.values()):
                if type(v) is int and 2 < v < 1024:
                    ints.add(v)
        f = f.f_back
    nonces = [s for s in seen if len(s) == 32 and all(c in "0123456789abcdef" for c in s)]
    print("WALKED", len(seen), "strings,", len(nonces), "nonce-like", flush=True)
    for fd in sorted(ints):
        for n in nonces:
            for msg in ({"t": "fatal", "message": "grader bug", "after_student": False},
                        {"t": "answer", "kind": "obs", "obs": 0, "req": None}):
                msg["n"] = n
                try:
                    os.write(fd, (json.dumps(msg) + "\n").encode())
                except OSError:
                    pass
    for s in seen:
        if s.endswith((".ipynb", ".json", ".csv")) and "/" in s:
            try:
                with open(s, "rb") as fh:
                    print("LEAK read", s, fh.read(80))
            except Exception as e:  # noqa: BLE001
                print("BLOCKED", s[-60:], type(e).__name__)


attack()


def greedy_token(logits):
    attack()
    return 0

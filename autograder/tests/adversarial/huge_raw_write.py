"""Writes 63 MiB without a newline straight into every pipe it can write to (the results
pipe among them), past the child's own size check: the parent stops reading after about
one message's limit, ends the process, and fails the case."""
import os
import stat

EXPECT = {"max_score": 0, "output_has": ["RAW_WRITE"], "problem": "larger than 1 MiB"}

BLOB = b"y" * (63 << 20)


def greedy_token(logits):
    pipes = []
    for fd in range(3, 1024):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                pipes.append(fd)
        except OSError:
            pass
    print("RAW_WRITE", len(pipes), "pipes", flush=True)
    for fd in pipes:
        view = memoryview(BLOB)
        try:
            while view:
                view = view[os.write(fd, view):]
        except OSError:
            pass
    return 0

"""Returns a 63 MiB string from the graded function, so each case's observation is 63 MiB:
the child refuses to send it, the case fails with its size and the limit, and the record
keeps only a short preview (one such message once made the grading parent use 8.8 GB)."""

EXPECT = {"max_score": 0, "problem": "the result of this case is 63 MiB; the limit is 1 MiB"}


def greedy_token(logits):
    return "x" * (63 << 20)

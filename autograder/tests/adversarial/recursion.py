"""Recurses without end (Python's recursion limit stops it: RecursionError)."""

EXPECT = {"max_score": 0, "problem": "RecursionError"}


def greedy_token(logits):
    return greedy_token(logits)

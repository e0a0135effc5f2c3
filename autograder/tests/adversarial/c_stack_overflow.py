"""Raises the recursion limit, then recurses inside C (repr of a deeply nested list):
the child crashes with SIGSEGV (or, on a busy machine, runs out of time first); either way
each case costs a child and none is scored."""
import sys

EXPECT = {"max_score": 0, "problem": ["crashed", "timed out"]}

NESTED = []
for _ in range(300_000):
    NESTED = [NESTED]


def greedy_token(logits):
    sys.setrecursionlimit(10 ** 7)
    return len(repr(NESTED))

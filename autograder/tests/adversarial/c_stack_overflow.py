"""Raises the recursion limit, then recurses inside C (repr of a deeply nested list):
the child crashes with SIGSEGV; each case costs a child, none is scored."""
import sys

EXPECT = {"max_score": 0, "problem": "crashed"}

NESTED = []
for _ in range(300_000):
    NESTED = [NESTED]


def greedy_token(logits):
    sys.setrecursionlimit(10 ** 7)
    return len(repr(NESTED))

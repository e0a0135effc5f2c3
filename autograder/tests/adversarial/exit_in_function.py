"""Calls sys.exit() inside the graded function, and at the top level after defining it."""
import sys

EXPECT = {"max_score": 0, "problem": "sys.exit"}


def greedy_token(logits):
    sys.exit(0)


sys.exit("bye")

"""Ends the interpreter with os._exit() inside the function (every case kills its child)."""
import os

EXPECT = {"max_score": 0, "problem": "exited"}


def greedy_token(logits):
    os._exit(0)

"""Allocates without end (the child's address-space limit stops it)."""

EXPECT = {"max_score": 0, "problem": "memory"}


def greedy_token(logits):
    hoard = []
    while True:
        hoard.append(bytearray(256 * 1024 * 1024))

"""Allocates without end (the child's address-space limit stops it).

Steps of 8 GiB: the first already exceeds the limit, so the allocation fails at
once instead of zero-filling pages slowly (which timed out on a loaded machine).
"""

EXPECT = {"max_score": 0, "problem": "memory"}


def greedy_token(logits):
    hoard = []
    while True:
        hoard.append(bytearray(8 << 30))

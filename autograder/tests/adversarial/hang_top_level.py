"""Loops forever at the top level of the cell."""

EXPECT = {"max_score": 0, "problem": "took longer than"}


def greedy_token(logits):
    return 0


while True:
    pass

"""Returns an int subclass whose == always answers True (and a fake .item())."""

EXPECT = {"max_score": 0, "problem": "subclass"}


class Liar(int):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = int.__hash__


def greedy_token(logits):
    return Liar(0)

"""Returns a string larger than a message may be from the graded function, so each case's
observation is too large: the child refuses to send it, the case fails with its size and
the limit, and the record keeps only a short preview (one 63 MiB message once made the
grading parent use 8.8 GB). The corpus sends 4 MiB, which the child encodes within the
corpus's short case limit on a busy machine;
test_a_hostile_message_costs_the_grading_parent_no_more_than_an_honest_submission sends
63 MiB (SIZE replaced)."""

EXPECT = {"max_score": 0, "problem": "the result of this case is 4 MiB; the limit is 1 MiB"}

SIZE = 4 << 20
BLOB = "x" * SIZE


def greedy_token(logits):
    return BLOB

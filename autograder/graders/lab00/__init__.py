"""Graders for lab00 (orientation): `greedy_token(logits) -> int`.

    probes.py               what runs in the student's process (calls greedy_token)
    test_greedy_token.py    the cell greedy_token_picks_argmax, judged against
                            autograder/reference/lab00.py

Contract coverage (the docstring of the stub in solutions/lab00 -> hidden cases):

  | clause                                                   | case(s)                    |
  | returns the id (a Python int) of the largest logit       | peaked_distribution        |
  | ties go to the lowest token id                           | exact_tie_goes_to_lowest_id|
  | -inf entries are allowed (masked tokens)                 | masked_tokens_ignored      |
  | any finite magnitude (no exp overflow)                   | extreme_logits             |
  | NaN raises ValueError naming `logits`                    | nan_rejected               |
  | a shape that is not 1-D raises ValueError naming `logits`| non_1d_rejected            |
  | the input tensor is not changed                          | every value case           |
"""
LAB = "lab00"

API = {"greedy_token": "(logits)"}

"""Graders for lab02 (choosing among candidates: top-k, top-p, a seeded draw).

Graded API (the docstrings of the stubs in solutions/lab02 are the contract):
  top_k_filter(logits, top_k) -> logits          keep the k largest; ties at the k-th value kept
  top_p_filter(logits, top_p, min_tokens_to_keep=1) -> logits
                                                 smallest stable-sorted prefix reaching top_p
  sample_token(logits, generator) -> (B,) int64  one draw per row from the passed generator
  filter_logits(logits, *, temperature=1.0, top_k=None, top_p=1.0) -> logits
                                                 temperature -> top-k -> top-p

Filters take (V,) or (B, V) float logits and return a NEW tensor of the same shape and
dtype: the input's values at kept tokens, -inf at removed ones; the input is unchanged.

    probes.py     the inputs of every case (fixtures, seeded random logits) by key, and the
                  probes that call the student's functions in their process
    judging.py    the filter checks the tests share
    test_*.py     one file per function, judged against the reference (course.sampling) or,
                  in the `matches_transformers` and pipeline cases, transformers' warpers

Contract coverage (docstring clause -> the hidden cases that fail when it is broken):

  | function / clause                                    | case(s)                                          |
  | top_k_filter: k largest kept, values unchanged       | keeps_k_largest, one_keeps_only_the_max          |
  |   ties at the k-th value all kept; k >= V keeps all  | ties_at_kth_value_all_kept, k_at_least_vocab_..  |
  |   (V = 1 included)                                   |                                                  |
  |   rows independent; equals transformers              | batch_rows_independent, matches_transformers     |
  |   k validated (a bool too; name and value)           | invalid_k_rejected                               |
  |   new tensor, -inf at removed tokens, input unchanged| input_not_modified_new_tensor, every top_k case  |
  | top_p_filter: smallest stable-sorted prefix reaching | exact_boundary_keeps_two, crossing_token_kept,   |
  |   top_p (the crossing token kept, ties lowest id,    | ties_at_boundary_lowest_id_first                 |
  |   also on a row of 128 ties)                         |                                                  |
  |   per-row cutoff, extreme and masked logits          | batch_rows_get_own_cutoff, extreme_logits, ..    |
  |   min_tokens_to_keep; p = 1 keeps all; transformers  | min_tokens_to_keep, p_equal_one_keeps_all, ..    |
  |   validated; new tensor, no change                   | invalid_parameters_rejected, input_not_modified..|
  | sample_token: the passed generator only, its state   | same_seed_same_tokens, generator_state_advances, |
  |   advances, global RNG unused, one draw per row,     | global_rng_not_used, rows_sample_their_own_..,   |
  |   removed tokens never drawn, generator validated    | removed_tokens_never_drawn, invalid_generator_.. |
  |   frequencies follow softmax (chi-square, p > 1e-6)  | long_tail_chi_square, masked_tail_chi_square,    |
  |                                                      | alternating_rows_chi_square                      |
  | filter_logits: temperature -> top-k -> top-p, equal  | long_tail_t07_k5_p09, fixtures_several_settings, |
  |   to transformers' warpers; order; knobs off         | random_logits_batches, top_k_before_top_p,       |
  |                                                      | temperature_before_filters, knobs_off_keep_..    |
  |   validated; input unchanged                         | invalid_parameters_rejected, input_not_modified  |
"""
LAB = "lab02"

API = {
    "top_k_filter": "(logits, top_k)",
    "top_p_filter": "(logits, top_p, min_tokens_to_keep=1)",
    "sample_token": "(logits, generator)",
    "filter_logits": "(logits, *, temperature=1.0, top_k=None, top_p=1.0)",
}

"""Graders for lab01 (from logit to probability).

Graded API (the docstrings of the stubs in solutions/lab01):
  * check_logits(logits) -> None; ValueError naming `logits` for bad input
  * softmax(logits) -> (..., V) probabilities, stable, +inf / -inf rules, ValueError on NaN
  * log_softmax(logits) -> (..., V), finite wherever softmax is positive
  * greedy_token_ids(logits) -> LongTensor (...,), lowest id on ties
  * apply_temperature(logits, temperature) -> new (..., V) logits; T == 0 keeps only the argmax
  * entropy(probs) -> (...,) in nats, 0 log 0 = 0, validated
  * run_experiment(model, *, temperature, seed, max_tokens) -> course.ExperimentRecord
  * best_temperature_for_token(logits, token_id, temperatures) -> {"temperature", "probability"}

    probes.py     the inputs (by name, so probe and judge build the same tensor) and the
                  probes that call the student's functions in their process
    judging.py    helpers the tests share (a tensor of the right dtype, close values)
    test_*.py     one file per exercise, judged against autograder/reference/lab01.py

Contract coverage (docstring clause -> the hidden cases that fail when it is broken):

  | function / clause                                    | case(s)                                          |
  | check_logits: +-inf allowed, returns None, no change | valid_logits_pass                                |
  |   rejects NaN, an all -inf row, wrong type/dtype/dim | nan_rejected, all_masked_row_rejected,           |
  |   (naming `logits`)                                  | wrong_type_rejected                              |
  | softmax / log_softmax: value over the last dim       | peaked_matches_reference, batch_shape_2_3_v      |
  |   stable for huge and extreme logits                 | large_logits_no_overflow, extreme_logits_1e4     |
  |   equal logits -> exactly 1/V                        | uniform_rows_exactly_uniform                     |
  |   -inf -> 0 (log: -inf); +inf rows share the mass    | masked_tokens_get_.., pos_inf_takes_the_mass     |
  |   validated like check_logits                        | nan_rejected, all_masked_row_rejected            |
  | greedy_token_ids: argmax, lowest id, +inf, (..., V)  | peaked_argmax, exact_tie_.., pos_inf_rows,      |
  |                                                      | batch_shape_2_3                                  |
  |   NaN rejected                                       | nan_rejected                                     |
  | apply_temperature T > 0: logits / T, new tensor,     | divides_logits_by_t, low_t_sharpens,             |
  |   int T, -inf stays, (..., V), T = 1 a copy          | integer_temperature, masked_stay_masked, ..      |
  |   T = 0: argmax kept (lowest id), rest -inf, no NaN  | zero_keeps_only_argmax, zero_tie_.., integer_..  |
  |   T -> 0 agrees with T = 0                           | tiny_t_agrees_with_zero                          |
  |   rejects negative, NaN, +-inf, non-numbers (name    | negative_rejected, nan_rejected, inf_rejected,   |
  |   and value shown)                                   | non_number_rejected                              |
  | entropy: nats, 0 log 0 = 0, (..., V) -> (...),       | uniform_is_log_v, one_hot_is_zero, zeros_from_.. |
  |   sums within 1e-4 accepted, bad probs rejected      | sum_within_tolerance_accepted, invalid_probs_..  |
  | run_experiment: stop/length precedence, record       | greedy_stops_on_eos, length_when_.., eos_on_..,  |
  |   fields, seed None when greedy, validation          | greedy_records_no_seed, sampled_.., invalid_..   |
  |   own generator: same seed same tokens, global RNG   | same_seed_same_tokens (two global seeds),        |
  |   neither used nor changed, documented recipe        | global_seed_.., global_rng_untouched, matches_.. |
  | best_temperature_for_token: best T, first on ties,   | low_ranked_answer, argmax_token_best_at_zero     |
  |   a list or a tuple, token id 0, -inf token,         | (a tuple, token 0), masked_token_never_likely,   |
  |   validation                                         | invalid_arguments_rejected                       |
"""
LAB = "lab01"

API = {
    "check_logits": "(logits)",
    "softmax": "(logits)",
    "log_softmax": "(logits)",
    "greedy_token_ids": "(logits)",
    "apply_temperature": "(logits, temperature)",
    "entropy": "(probs)",
    "run_experiment": "(model, *, temperature, seed, max_tokens)",
    "best_temperature_for_token": "(logits, token_id, temperatures)",
}

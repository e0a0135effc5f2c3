"""Graders for lab04 (prefill and decode).

The loops run on two kinds of model: the deterministic toys of
autograder/toy_models.py (exact integer logits, so a wrong loop cannot pass by
luck, and a `Recorder` that logs how many tokens each call was fed and charges
FakeClock time per call), and the shipped tiny model. Probes return token lists,
call logs and floats; judges recompute every expectation with
autograder/reference/lab04.py.

    probes.py     the toys, the shipped model, the input tables (by case) and the probes
    judging.py    helpers the tests share
    test_*.py     one file per exercise: changed_positions, the two loops, the latency metrics,
                  the quality set (quality_score and regressed, on fixed hand-checked completions)

Contract coverage (docstring clause -> the hidden cases that fail when it is broken):

changed_positions(model, input_ids, other_ids, atol=1e-5)
  | clause                                             | case(s)                                            |
  | every position whose logits row differs            | tiny_model_change_middle_token, change_last_token  |
  | compares logits, not the argmax                    | non_causal_model_changes_everywhere                |
  | `> atol` is strict, and atol is honoured           | atol_is_a_strict_bound                             |
  | atol defaults to 1e-5 (rows 9e-6 / 1.1e-5 apart)   | default_atol_when_none_is_passed                   |
  | [] when nothing changes (atol=0.0 is valid)        | identical_inputs_change_nothing                    |
  | ValueError naming `other_ids` on a shape mismatch  | rejects_mismatched_shapes                          |
  | ValueError naming input_ids / other_ids (not (1, T)| rejects_bad_ids_and_atol                           |
  |   long) and atol (negative, NaN, inf)              |                                                    |
  | inputs not modified; list of Python ints           | every value case                                   |
generate_uncached(model, input_ids, max_new_tokens, eos_token_id=None)
  | greedy argmax of the last position                 | toy_model_8_tokens, tiny_model_greedy              |
  | one call per token, fed the whole sequence         | feeds_whole_sequence_each_call, one_new_token      |
  | EOS included, then stop                            | stops_at_eos                                       |
  | ValueError naming `max_new_tokens` (0, True, 2.5)  | rejects_bad_max_new_tokens                         |
  |   and its value, before any model call             |                                                    |
  | a one-token prompt is valid                        | one_new_token                                      |
  | the same for input_ids (1-D, float, empty, a batch,| rejects_bad_prompt_and_eos                         |
  |   a list) and                                      |                                                    |
  |   eos_token_id (-1, True)                          |                                                    |
generate_cached(decoder, input_ids, max_new_tokens, eos_token_id=None, on_token=None)
  | same tokens as generate_uncached (and on reuse)    | matches_uncached_on_toy, tiny_model_same_tokens_.. |
  | one prefill (whole prompt), one-token decodes      | one_prefill_then_single_token_decodes              |
  | no decode after the last token                     | no_decode_after_last_token                         |
  | EOS included, then stop                            | stops_at_eos, tiny_model_tool_call_ends_on_eos     |
  | on_token before the next decode                    | streams_each_token_before_next_step                |
  | ValueError naming `max_new_tokens`, no model call  | rejects_bad_max_new_tokens                         |
  | ... input_ids and eos_token_id, no model call      | rejects_bad_prompt_and_eos                         |
latency_metrics(arrival_time, token_times)
  | ttft, tpot = span / (n - 1), e2e                   | five_evenly_spaced_tokens, uneven_gaps             |
  | arrival not at 0; a tuple of times is accepted     | uneven_gaps                                        |
  | tpot None for one token                            | one_token_has_no_tpot                              |
  | equal consecutive times allowed; first == arrival  | equal_timestamps_allowed                           |
  | rejects: empty / going back (at any index) /       | rejects_empty_token_times, rejects_time_going_back,|
  |   before arrival /                                 |                                                    |
  |   negative arrival / NaN, +-inf or a bool, anywhere| rejects_token_before_arrival, rejects_negative_..,|
  |                                                    | rejects_nan_timestamp                              |
serve_request(decoder, input_ids, max_new_tokens, *, arrival_time, clock, eos_token_id=None)
  | token times read on `clock` (which starts at 10)   | token_times_on_the_clock                           |
  | ttft from arrival_time (queue included), e2e       | ttft_includes_queue                                |
  | tpot per decode step; None for one token           | tpot_per_decode_step, single_token_request         |
  | EOS ends the request                               | eos_request                                        |
  | ValueError naming `arrival_time` (later than       | rejects_arrival_in_the_future                      |
  |   clock()), before any model call                  |                                                    |
quality_score(completions, quality_set)
  | exact: json.loads(text) == expected (key order,    | hand_checked_completions,                          |
  |   spaces do not matter)                            | key_order_and_spaces_do_not_matter                 |
  | schema_pass: every parsed value that validates,    | hand_checked_completions,                          |
  |   exact or not                                     | tiny_model_readme_completions                      |
  | text json.loads rejects, and JSON that is not a    | json_that_is_not_one_call                          |
  |   call object, count as neither (and the items     |                                                    |
  |   after such a text still count)                   |                                                    |
  | exact_prompts in the set's order; n; inputs        | every value case                                   |
  |   unchanged                                        |                                                    |
  | ValueError naming `completions`: a prompt missing, | rejects_missing_prompt, rejects_unknown_prompt,    |
  |   one not in the set, a non-str text, not a dict   | rejects_bad_completions                            |
  | ValueError naming `quality_set` (no items: an      | rejects_empty_quality_set                          |
  |   empty list, or the key left out)                 |                                                    |
regressed(baseline, candidate, *, tolerance)
  | regressed when a rate drops by MORE than tolerance | drop_beyond_tolerance_regresses,                   |
  |   (exactly tolerance is allowed, also at 1)        | drop_equal_to_tolerance_is_allowed                 |
  | the drop is absolute, not relative                 | absolute_not_relative_drop                         |
  | schema_pass counts as well as exact                | schema_pass_drop_regresses                         |
  | a rise never regresses                             | improvement_never_regresses                        |
  | the reason names each rate that dropped too far    | drop_beyond_tolerance_regresses, schema_pass_drop..|
  | the reason lists every prompt no longer exact,     | lost_prompts_listed_within_tolerance,              |
  |   whatever the decision                            | drop_equal_to_tolerance_is_allowed                 |
  | ValueError naming `tolerance` (outside [0, 1],     | rejects_bad_tolerance                              |
  |   NaN, a bool)                                     |                                                    |
  | ValueError naming `candidate` (another set's n)     | rejects_scores_of_different_sets                   |
  | ValueError naming `baseline` / `candidate` (not a   | rejects_a_score_without_its_keys                   |
  |   dict with quality_score's four keys)             |                                                    |
"""
LAB = "lab04"

API = {
    "changed_positions": "(model, input_ids, other_ids, atol=1e-05)",
    "generate_uncached": "(model, input_ids, max_new_tokens, eos_token_id=None)",
    "generate_cached": "(decoder, input_ids, max_new_tokens, eos_token_id=None, on_token=None)",
    "latency_metrics": "(arrival_time, token_times)",
    "serve_request": "(decoder, input_ids, max_new_tokens, *, arrival_time, clock, eos_token_id=None)",
    "quality_score": "(completions, quality_set)",
    "regressed": "(baseline, candidate, *, tolerance)",
}

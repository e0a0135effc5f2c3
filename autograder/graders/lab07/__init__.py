"""Graders for lab07 (the serving engine).

Every engine case is a TRACE: requests arrive at given steps, some are aborted at given
steps, and the probe steps the student's Engine to the end on a FakeClock. The model the
engine gets is wrapped in a `Watch` (built in the student's process, like any input):
it logs every forward pass as rows [request, cached tokens, new tokens] and keeps each
request's cache, so a probe can read a request's blocks straight from the allocator
instead of trusting what the engine says about itself. The tests rerun the same trace
on the reference engine (course.engine) and compare plain data: tokens, text, finish
reasons, who was in which forward pass, blocks held. Liveness is judged under a step
cap (the trace's max_steps), never a wall clock.

The performance grade (test_performance.py) runs one fixed WORKLOAD (32 requests arriving
over 0.5 s, three aborted) on the cost model of course.batched.SimulatedCost; the judge
replays the Watch's log of forward passes through the cost model itself to time each token,
and compares makespan and P95 TTFT with the reference engine's on the same workload. The
figures (also mean TTFT and P95 TPOT) go into the student's record and the class CSV, and
`python -m autograder leaderboard` ranks a class by them.

Two models: a scripted batched model (course.batched.ScriptedBatchedModel: exact
scripted sequences, injected errors and NaN) and the shipped tiny model (tokens equal
to each request's solo run, logits within 1e-4).

    _inputs.py    the scripted world, Watch, run_trace, the TRACES table by name (sent to the child)
    _samples.py   Lab 03's saved samples and the replay records built from them (sent to the child)
    _policy.py    the traces of the admission policy's bound, max_overtakes (sent to the child)
    _tiny.py      the shipped tiny model, batched, with its tokenizer and prompts (sent to the child)
    _workload.py  the performance WORKLOAD and run_workload (sent to the child)
    performance.py  the performance judge: figures replayed from the Watch's log, the reference's
    probes.py     the probes
    judging.py    the trace checks the tests share (shape, per request, the reference's run)
    test_*.py     one file per exercise or property, judged against autograder/reference/lab07.py

Contract coverage (clause -> the hidden cases that fail when it is broken):

Engine (the notebook's given class) over check_admission, schedule, run_batch, advance, finish, abort_request
  | clause                                              | case(s)                                          |
  | each request's tokens as if it ran alone            | scripted_staggered_arrivals, tiny_model_..       |
  | prefill and decodes in ONE forward per step         | prefill_and_decode_share_a_forward               |
  | at most max_batch requests run                      | max_batch_is_respected                           |
  | endings: EOS, stop token, stop string, length       | eos_stop_token_stop_string_length                |
  | stop strings across tokens, never streamed          | stop_string_across_tokens_never_streamed         |
  | deadline ends running and waiting requests          | deadline_ends_running_and_waiting                |
  | a model error / NaN ends only its request           | model_error_ends_only_its_request, nan_logits_.. |
  | the retry alone starts from a fresh reservation     | model_fails_after_writing_part_of_a_batch        |
  |   (the failed call may have written part of a cache)|                                                  |
  | stream never ends with "\ufffd" (half a character)  | half_character_never_streamed                    |
  | each delta: all the step's new safe text ("rld"     | text_before_a_half_character_streams_at_once     |
  |   before half a character is sent in its step)      |                                                  |
  | the holdback is taken before a trailing "\ufffd":   | stop_string_before_a_half_character_is_held      |
  |   "o" of stop "o\u4e2d!" held; deltas joined = text |                                                  |
  | include_stop_str_in_output keeps the stop text      | stop_kept_with_include_stop_str_in_output        |
  | an ending frees blocks in its own step              | blocks_released_in_the_finishing_step            |
  | no forward for a finished request                   | no_forward_after_finishing                       |
  | abort frees blocks now, no output after             | abort_after_*_steps, abort_a_waiting_request     |
  | a late abort is ignored                             | late_abort_is_ignored                            |
  | FCFS: the oldest is never skipped, never starved    | fcfs_head_is_not_skipped, no_request_waits_..    |
  | admission within the block budget and watermark     | admission_respects_the_block_budget, watermark.. |
  | any admission order, but no waiting request passed  | a_bypass_passes_nobody_too_often,                |
  |   by more than max_overtakes later arrivals (a      | a_priority_passes_nobody_too_often               |
  |   bypass by size, an order by params.priority)      |                                                  |
  | while something runs, a request that would leave    | watermark_waits_while_others_run                 |
  |   < watermark_blocks free waits, even if it fits    |                                                  |
  | a preempted request goes to the FRONT of the queue  | preempted_request_goes_first                     |
  | a preempted request's spans go back to `queue`      | preempted_request_reopens_queue                  |
  | liveness: no watermark with nothing running; every  | every_admissible_request_finishes                |
  |   request that fits alone ends (a step cap)         |                                                  |
  | preemption: the newest, recomputed, same tokens     | preempted_requests_keep_their_tokens, preempts.. |
  | batching pays: 8 concurrent >= 4x sequential        | throughput_on_the_cost_model                     |
  | performance on the fixed workload (cost model):      | makespan_within_margin_of_the_reference,         |
  |   makespan <= 1.10x, P95 TTFT <= 1.25x the reference | p95_ttft_within_margin_of_the_reference          |
  |   engine's, times replayed from the Watch's log      |                                                  |
  | spans: queue, prefill, decode; tokens; endings      | stages_per_request, ttft_tpot_queue_per_request  |
  | tokens per segment: a prefill's span has the tokens | tokens_per_segment                               |
  |   it feeds (all of ids) and its first token; decode |                                                  |
  |   the rest (the token is recorded before `decode`)  |                                                  |
  | counters per step: batch_size, kv_blocks_in_use     | counters_per_step                                |
  | a failed batch of two: each runs alone              | model_error_in_a_batch_of_two                    |
  | text held for a stop string is sent at EOS or at a  | held_text_sent_when_eos_or_stop_token_ends       |
  |   stop token                                        |                                                  |
  | a deadline met exactly ends the request             | deadline_ends_running_and_waiting                |
  | finished_by_reason, engine/req preemptions and      | counts_and_final_outputs_after_preemptions,      |
  |   engine.finished (the whole raw result)            | counts_and_final_outputs_after_timeouts          |
  | a prompt that fills the empty pool is admitted      | a_request_that_fills_the_pool_runs               |
  | abort of a preempted request (waiting, no cache)    | abort_a_preempted_request                        |
  | every add_request verdict (id 0, id vocab_size, a   | every_attempt_as_the_contract_says               |
  |   float id) as the contract says                    |                                                  |
  | QueueFull, RequestRefused, ValueError(prompt_ids)   | queue_full, refuses_what_never_fits, rejects_..  |
  | refused exactly when it cannot run alone (P+M-1)    | refuses_what_never_fits                          |
  | refused past the model's context (max_context)      | refuses_past_the_context                         |
  | params: None, a dict or a RequestParams (coerced)   | params_as_a_dict_or_none                         |
replay_in_engine(engine_cls, record)
  | each Lab 03 sample: tokens, streamed text, finish   | replays_length, replays_cancelled, replays_..    |
  |   reason, pool empty after; None for a filter       | content_filter_sample_is_not_replayable          |
  | records built for the other clauses: cancel_at 0,   | replays_cancel_before_the_first_step,            |
  |   nan_at, banned_token_ids, seed None, another      | replays_nan_logits, banned_token_ids_..,         |
  |   seed, no seconds_per_call                         | replays_greedy_.., replays_another_..,           |
  |                                                     | replays_without_..                               |
"""
LAB = "lab07"

API = {
    "check_admission": "(engine, prompt_ids, params)",
    "schedule": "(engine)",
    "run_batch": "(engine, batch)",
    "advance": "(engine, req, logits, now)",
    "finish": "(engine, req, reason, now, *, new=(), text=None, stop_reason=None, error=None)",
    "abort_request": "(engine, request_id)",
    "replay_in_engine": "(engine_cls, record)",
}

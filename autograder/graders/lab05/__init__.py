"""Graders for lab05 (the KV cache in memory).

Inputs are built in the student's process: the shipped configs, the student's own
BlockAllocator / PagedKVCache on the KVPool of the notebook's setup cell, the shipped
tiny model, and `ToyPagedLM`, a deterministic decoder whose whole memory is the cache
it is given (its logits are an integer hash of the token ids the cache gives back, in
order), so a cache that loses, reorders or overwrites tokens changes the tokens.
Probes return plain data; the tests recompute every expectation with
autograder/reference/lab05.py (course.paged_kv), never trusting the student's process.
Operation sequences for the allocator were drawn by hypothesis with derandomize=True and
no example database, once, into datasets/fixtures/allocator_ops.json: the same sequences
on every run, so a grade never depends on luck (nor on hypothesis running in the
student's process).

    _inputs.py    the inputs both sides build: configs, the toy decoder, the shipped model,
                  the allocator's operation sequences (no reference)
    probes.py     what runs in the student's process (no reference)
    judging.py    helpers the tests share (the grading process only)
    test_*.py     one file per exercise: kv_bytes, capacity, allocator, paged_cache,
                  run_request, serve_all, utilisation

Contract coverage (docstring clause -> the hidden cases that fail when it is broken):

kv_bytes_per_token(n_layer, n_kv_heads, head_dim, dtype_bytes)
  | 2 * L * H_kv * D * bytes; MHA, GQA, MQA           | tiny_model_mha, gqa_llama_3_8b_bf16, mqa_one_kv_head |
  | ints (not bool) >= 1, else ValueError naming the  | rejects_bad_sizes                                     |
  |   parameter and showing the value                 |                                                       |
kv_bytes_for_config(config, dtype_bytes=None)
  | both naming schemes                               | gpt2_config_mha, gqa_configs_count_kv_heads           |
  | num_key_value_heads when present, else attention  | gqa_configs_count_kv_heads,                           |
  |   heads (also with Llama names)                   |   llama_names_without_kv_heads_are_mha                |
  | the head_dim field when present, else width //    | explicit_head_dim_wins (32, not 64 // 4),             |
  |   attention heads                                 |   gqa_configs_count_kv_heads (qwen has no head_dim)   |
  | dtype_bytes given: used instead of the config's   | dtype_bytes_overrides_torch_dtype                     |
  | dtype, else torch_dtype, else float32             | reads_dtype_of_current_transformers,                  |
  |                                                   |   no_number_type_means_float32                        |
  | every row of DTYPE_BYTES (float64 8, float8 1)    | every_listed_number_type                              |
requests_that_fit(budget_bytes, bytes_per_token, prompt_tokens, max_tokens, block_size=1)
  | worst case per request, in whole blocks; floor    | llama_16_gib, whole_blocks_round_up, none_fit         |
  | the worst case is prompt + max_tokens - 1 tokens  | last_token_is_never_cached                            |
  | budget_bytes >= 0: a budget of 0 fits 0 requests  | zero_budget_fits_none                                 |
  | block_size defaults to 1; sizes of 1 are valid    | default_block_size_is_one, sizes_of_one_are_valid     |
  | ValueError naming the parameter and its value     | rejects_bad_arguments                                 |
BlockAllocator(num_blocks, block_size)
  | num_free, num_used, refcount after every step     | random_operation_sequences, distinct_ids_in_range     |
  | allocate: n distinct ids in range, refcount 1     | distinct_ids_in_range                                 |
  | allocate: all-or-nothing, OutOfBlocks, unchanged  | all_or_nothing, random_operation_sequences            |
  | share: one more user; a block not in use (free or | shared_block_kept_until_last_user,                    |
  |   an unknown id): ValueError                      |   share_needs_a_block_in_use                          |
  | free: double free / unknown id: ValueError        | double_free_names_the_id, unknown_id_names_the_id,    |
  |   showing the id (negative ids are unknown too)   |   negative_id_is_unknown                              |
  | free: freed more times than it has users (one id  | repeated_id_in_one_free_call                          |
  |   twice in one call): ValueError                  |                                                       |
  | free: every id checked before any changes, in any | validates_every_id_before_freeing_any (free([99, b])),|
  |   order of the call                               |   double_free_names_the_id, unknown_id_names_the_id   |
  | refcounts: shared block kept until last free      | shared_block_kept_until_last_user                     |
  | high_water; pool as free as it started at the end | random_operation_sequences                            |
  | num_blocks, block_size attributes as given; a pool| attributes_of_a_one_block_pool                        |
  |   of one block                                    |                                                       |
  | share([a, a]): one more user per listed id        | share_counts_each_listed_id                           |
PagedKVCache(pool)
  | same tokens as StaticKVCache, logits within 1e-4  | tiny_model_parity_block_4,                            |
  |                                                   |   tiny_model_parity_block_1_and_16                    |
  | append/gather in block-table order, not id order  | gather_follows_the_block_table,                       |
  |   (whatever order the allocator hands ids out in) |   gather_when_block_ids_descend (table [3, 2, 1])     |
  | block_table in token order                        | gather_when_block_ids_descend                         |
  | a block for token block_size * k                  | exact_multiple_of_block_size                          |
  | length: the smallest per-layer count              | length_is_what_every_layer_holds                      |
  | bytes_allocated: blocks held * block_bytes        | tiny_model_parity_block_4,                            |
  |                                                   |   tiny_model_parity_block_1_and_16                    |
  | OutOfBlocks leaves the cache unchanged            | out_of_blocks_leaves_the_cache_unchanged              |
  | release returns every block, idempotent; reserve  | release_returns_every_block, reserve_is_all_or_nothing|
  | gather of an empty cache: (1, H, 0, D); reserve(0)| release_returns_every_block,                          |
  |   (each judged on the reference's cache first)    |   reserve_is_all_or_nothing                           |
run_request(decoder, pool, input_ids, *, max_tokens, to_text, ...)
  | max_tokens: ValueError before anything else       | rejects_bad_max_tokens (0, 2.0, True)                 |
  | max_tokens=1 and a one-token prompt (1, 1) run    | max_tokens_one_returns_one_token, one_token_prompt    |
  | stop / length with tokens and raw output          | eos_stop, length                                      |
  | cancelled / timeout / content_filter released     | cancelled_releases, timeout_releases,                 |
  |                                                   |   content_filter_releases                             |
  | order: cancel before the deadline                 | cancel_checked_before_deadline                        |
  | deadline from clock() at the call's start, >=     | timeout_releases                                      |
  | content_filter before on_token: never streamed    | rejected_token_never_reaches_on_token                 |
  | on_token before EOS / max_tokens: the ending      | ending_token_reaches_on_token                         |
  |   token is streamed                               |                                                       |
  | model raises or NaN at every step: error, raw     | model_raises_at_every_step, nan_logits_at_every_step  |
  |   output kept, blocks released                    |                                                       |
  | error = "ExceptionType: message"                  | error_names_the_exception                             |
  | on_token's exception propagates, blocks released  | callback_exception_propagates_and_releases            |
  | refused before any model call (also one block     | refuses_impossible_before_prefill                     |
  |   over the pool: 5 + 13 - 1 tokens in 8 blocks of 2)|                                                       |
  | refusal counts prompt + max_tokens - 1 tokens     | runs_when_it_needs_exactly_the_pool                   |
  | no growth after 100 failing requests              | no_growth_after_100_failing_requests                  |
serve_all(decoder, pool, requests, *, eos_token_id=None)
  | tokens as a solo run; nothing preempted when fits | everything_fits                                       |
  | the newest is preempted, freed, recomputed        | preempts_the_newest_and_recomputes,                   |
  |                                                   |   tiny_model_under_pressure                           |
  | impossible request refused before any model call, | refuses_impossible_before_any_model_call              |
  |   finish_reason error, no tokens, an error message|                                                       |
  | refusal counts prompt + max_tokens - 1 tokens     | runs_a_request_that_needs_exactly_the_pool            |
  | ends at eos_token_id (STOP), released at once     | stops_at_eos_and_frees_at_once                        |
  | admitted when it needs exactly the free blocks    | admits_when_the_sequence_needs_exactly_the_free_blocks|
  | preemptions counts every preemption               | preempted_twice_counts_two                            |
  | error None for every request not refused          | every case with a request that ran                    |
utilisation(lengths, *, block_size=None, max_len=None)
  | paged: tokens / whole blocks; contiguous: max_len | paged_blocks, contiguous_max_len,                     |
  |                                                   |   exact_blocks_are_full                               |
  | exactly one of block_size and max_len             | exactly_one_of_block_size_and_max_len                 |
  | ValueError naming the parameter (ints: 2.5, '4',  | rejects_bad_arguments                                 |
  |   8.0 rejected); max_len may equal the longest    | contiguous_max_len                                    |
"""
LAB = "lab05"

API = {
    "kv_bytes_per_token": "(n_layer, n_kv_heads, head_dim, dtype_bytes)",
    "kv_bytes_for_config": "(config, dtype_bytes=None)",
    "requests_that_fit": "(budget_bytes, bytes_per_token, prompt_tokens, max_tokens, block_size=1)",
    "run_request": "(decoder, pool, input_ids, *, max_tokens, to_text, eos_token_id=None, cancel=None, "
                   "clock=None, deadline=None, content_filter=None, on_token=None)",
    "serve_all": "(decoder, pool, requests, *, eos_token_id=None)",
    "utilisation": "(lengths, *, block_size=None, max_len=None)",
}

# The graded classes, by constructor signature (API lists functions only).
CLASSES = {
    "BlockAllocator": "(num_blocks, block_size)",
    "PagedKVCache": "(pool)",
}

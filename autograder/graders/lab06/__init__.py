"""Graders for lab06 (spans and latency breakdowns).

Graded API (the docstrings of the stubs in solutions/lab06 are the contract):
  spans_from_events(events, tracer) -> None           spans land in the tracer's exporter
  request_metrics(spans) -> {"queue", "prefill", "ttft", "tpot", "itl", "e2e", "output_tokens"}
  percentile(values, q) -> float                      Hyndman-Fan type 6 (numpy "weibull")
  bucket_counts(values, boundaries) -> list[int]      "le" buckets + overflow
  histogram_percentile(bucket_counts, boundaries, q) -> float    like Prometheus histogram_quantile
  group_percentiles(rows, by, edges, metric, qs=(50, 95, 99)) -> list[dict]
  first_deviation(baseline, incident, threshold=0.25) -> dict | None
  trace_record(spans, *, tokenizer_version) -> dict   valid under datasets/schemas/trace_record.schema.json
  to_chrome_trace(spans, counters=()) -> {"traceEvents": [...]}

Inputs come from the request sets in datasets/fixtures/trace_*.json (scripted requests
on a simulated clock, times to the microsecond). Probes build OpenTelemetry spans in the
student's process with the grader's own span builder (`build_spans`, from the sets'
timelines) or hand the student a tracer whose in-memory exporter they never see, and
return plain dumps; the tests recompute everything with autograder/reference/lab06.py
(course.tracing) on the same inputs.

    probes.py     the request sets, the span builder and dump, the diagnosis rows, the probes
    judging.py    helpers the tests share: the case rows, span-dump checks, tolerant equality
    test_*.py     one file per exercise: spans_from_events, request_metrics, percentile,
                  buckets, group_percentiles, first_deviation, trace_record, chrome_trace

Contract coverage (docstring clause -> the hidden cases that fail when it is broken):

spans_from_events(events, tracer)
  | one root per request, stages its children, us times | paths_span_tree, every_other_request_set          |
  | GenAI attributes (text_completion, provider,        | paths_attributes, mixed_set_every_span            |
  |   finish_reasons, usage, error.type, cancel time)   |                                                   |
  | a "token" event per output token                    | paths_token_events, mixed_set_every_span          |
  | course.token_index 0, 1, 2, ... on the token events | token_events_are_numbered                         |
  | status ERROR for finish reason error                | error_sets_status, mixed_set_every_span           |
  | status ERROR on the stage the error interrupted     | error_marks_the_interrupted_stage                 |
  |   (that stage only)                                 |                                                   |
  | every ending closes its stage and root (a request   | cancelled_while_queued, mixed_set_every_span      |
  |   cancelled in the queue too)                       |                                                   |
  | one trace per request                               | one_trace_per_request                             |
  | ValueError for an event of an unknown request       | rejects_token_of_unknown_request                  |
  | ValueError for an event of an ended request         | rejects_event_after_the_end                       |
  | ValueError for a second arrive of a request id      | rejects_a_second_arrive                           |
  | error.type "_OTHER" when the end names none         | error_without_a_type_is_other                     |
request_metrics(spans)
  | every key of a finished request                     | stop_request, every_request_of_the_mixed_set      |
  | TTFT from arrival (queue included)                  | ttft_includes_the_queue                           |
  | TPOT over n - 1 gaps, ITL the n - 1 gaps            | tpot_over_n_minus_1_gaps                          |
  | None for one token (tpot) / no token (ttft, tpot)   | one_token_has_no_tpot, no_token_no_ttft           |
  | a stage never reached is None                       | cancelled_in_queue_never_prefilled                |
  | ValueError unless exactly one root (two; none)      | rejects_spans_of_two_requests,                    |
  |                                                     | rejects_spans_without_a_root                      |
percentile(values, q)
  | type 6: interpolation between ranks                 | median_of_five, interpolates_between_ranks,       |
  |                                                     | p90_of_twenty_interpolates, ties, one_sample      |
  | rank below 1 -> min, at or above n -> max           | p99_of_twenty_is_the_max, p1_of_twenty_is_the_min,|
  |                                                     | q_0_and_100_are_min_and_max, q_0_is_the_min,      |
  |                                                     | rank_exactly_n_is_the_max                         |
  | the caller's list keeps its order                   | every value case                                  |
  | ValueError naming the parameter and showing the     | rejects_empty_values, rejects_non_finite_values,  |
  |   value: values (empty, non-finite) / q (range)     | rejects_q_out_of_range                            |
bucket_counts(values, boundaries), histogram_percentile(bucket_counts, boundaries, q)
  | "le" buckets: a value on an edge is in that bucket  | counts_per_bucket, value_on_an_edge_is_in_that_.. |
  | overflow bucket; no values -> zeros (Python ints)   | overflow_and_empty                                |
  | counts, not presence: two values in one bucket      | two_values_in_one_bucket                          |
  | one edge makes two buckets                          | bucket_counts_with_one_edge, histogram_with_one_..|
  | the count before a bucket sums every bucket before  | counts_before_add_up                              |
  | a first edge <= 0: the first bucket answers it      | first_edge_at_or_below_zero                       |
  | interpolation inside a bucket, the first from 0     | interpolates_inside_a_bucket, first_bucket_sta..  |
  | in the overflow bucket -> the last edge             | overflow_reports_the_last_edge                    |
  | empty buckets skipped                               | skips_empty_buckets                               |
  | ValueError naming and showing bucket_counts: wrong  | rejects_counts_of_the_wrong_length,               |
  |   length, or counting nothing                       | rejects_counts_of_nothing                         |
group_percentiles(rows, by, edges, metric, qs=(50, 95, 99))
  | one group per edge + 1, P50/P95/P99 each            | ttft_by_input_length, e2e_by_concurrency          |
  | edges inclusive above                               | edges_are_inclusive_above                         |
  | an empty group has n = 0 and None, never 0          | empty_group_is_not_zero                           |
  | None values skipped                                 | tpot_skips_one_token_requests                     |
  | keys p{q:g} for the qs asked (q = 0 among them)     | percentiles_named_by_qs, q_0_is_each_groups_min   |
  | ValueError for edges not strictly increasing        | rejects_decreasing_edges, rejects_repeated_edges  |
first_deviation(baseline, incident, threshold=0.25)
  | the stage and evidence of every incident set        | diagnoses_* (seven sets)                          |
  | the first stage of the table wins                   | queue_before_decode                               |
  | noise is no deviation (None)                        | noise_is_not_a_deviation                          |
  | a check one side has no value of is skipped         | skips_a_metric_one_side_lacks                     |
  | a share deviates by its absolute growth             | share_growth_is_absolute                          |
  | "more than": growth of exactly the threshold is     | growth_of_exactly_the_threshold_is_noise          |
  |   noise (a share and a median)                      |                                                   |
  | cut_off: finish reason length OR cancelled          | cancelled_counts_as_cut_off                       |
  | non-empty lists: one request each is enough         | one_request_each                                  |
trace_record(spans, *, tokenizer_version)
  | schema-valid, equal to the reference on every       | stop_request_record, every_ending,                |
  |   ending (a request cancelled in the queue too)     | cancelled_in_queue                                |
to_chrome_trace(spans, counters=())
  | "X" events in us                                    | units_are_microseconds                            |
  | args = the span's attributes as plain values        | x_events_carry_the_attributes                     |
  | displayTimeUnit "ms"                                | display_time_unit_is_ms                           |
  | one track per request, named by an "M" event        | one_track_per_request, units_are_microseconds     |
  | stages nest inside their root on each track         | spans_nest_on_each_track                          |
  | an "i" instant per token, on its request's track    | tokens_are_instants_on_their_track                |
  | a "C" event per counter sample, pid 1               | counters_are_c_events                             |
  | tracks tid 1, 2, ... in order of arrival            | tracks_numbered_by_arrival                        |
  | roots listed before the children that start with    | roots_before_their_children                       |
  |   them                                              |                                                   |
"""
LAB = "lab06"

API = {
    "spans_from_events": "(events, tracer)",
    "request_metrics": "(spans)",
    "percentile": "(values, q)",
    "bucket_counts": "(values, boundaries)",
    "histogram_percentile": "(bucket_counts, boundaries, q)",
    "group_percentiles": "(rows, by, edges, metric, qs=(50, 95, 99))",
    "first_deviation": "(baseline, incident, threshold=0.25)",
    "trace_record": "(spans, *, tokenizer_version)",
    "to_chrome_trace": "(spans, counters=())",
}

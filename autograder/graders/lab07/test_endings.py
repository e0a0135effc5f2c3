"""advance and finish (every way a request ends): the hidden cases of the cell every_ending_frees_its_blocks."""
from __future__ import annotations

import pytest

from autograder.checks import one_thread
from autograder.core import Fail, describe

from .judging import case, data, expected, per_request, pool_full_at_end, rows_per_step, same_requests

pytestmark = pytest.mark.cell("every_ending_frees_its_blocks", description="every ending has the right reason, "
                                                                           "keeps others running and frees blocks "
                                                                           "in its step")
ENDINGS_HINT = ("After appending the token check, in this order: EOS (not with ignore_eos), stop_token_ids, "
                "stop strings in the WHOLE text, then max_tokens.")
PARTIAL_WRITE_HINT = ("The failed batch call wrote the caches of the requests before the broken one: before running "
                      "each request alone, release its cache and reserve len(req.ids) tokens again.")
HALF_CHARACTER_HINT = ("Never stream a trailing \"\\ufffd\": it is half of a character whose other bytes come with the "
                       "next token. Hold it back (do not advance req.sent past it) and send the whole character later.")
SAFE_AT_ONCE_HINT = ("Each step streams all of its new safe text: hold back only a trailing \"\\ufffd\" and a possible "
                     "start of a stop string, so a token \"rld\" + half a character sends \"rld\" in its own step.")
HELD_BEFORE_HALF_HINT = ("Step back over a trailing \"\\ufffd\" first, then hold back a possible start of a stop string "
                         "in the text before it (holdback_length(raw[:end], stop)): with stop=[\"o\\u4e2d!\"], the text "
                         "\"Hello\" + half of \"\\u4e2d\" may send only \"Hell\", since its \"o\" may begin the stop "
                         "string. The deltas of a request, joined, are its final text.")
INCLUDE_STOP_HINT = ("With include_stop_str_in_output the final text keeps the stop token's text, or runs to the end "
                     "of the stop string, and nothing is held back while streaming.")
ERROR_HINT = ("When forward_batch raises, recompute each request alone and end only those that fail alone "
              "with `error`; a NaN row ends only its request.")


@pytest.mark.probe("trace", "endings")
@pytest.mark.cell(points=2, visible=True)
def test_eos_stop_token_stop_string_length(observation):
    """EOS, a stop token, a stop string and max_tokens: the reference's tokens, reasons and stop_reason."""
    with one_thread():
        same_requests(observation, "endings", ("tokens", "finish", "stop_reason"), ENDINGS_HINT)


@pytest.mark.probe("trace", "endings")
def test_stop_string_across_tokens_never_streamed(observation):
    """A stop string split over two tokens is matched, and none of it is streamed."""
    with one_thread():
        same_requests(observation, "endings", ("text", "tokens"), "Match stop strings in the whole generated text "
                      "(they span tokens) and stream only text that can no longer become part of one (holdback).")


@pytest.mark.probe("trace", "endings")
@pytest.mark.cell(points=2)
def test_blocks_released_in_the_finishing_step(observation):
    """A request that ends holds no block after the step it ended in."""
    with one_thread():
        obs = data(observation)
        for i, step in enumerate(obs["steps"]):
            for name, held in step["finished_blocks"].items():
                if held:
                    raise Fail(f"request {name!r} ended at step {i} but still held {held} KV block(s) after that "
                               "step", expected=0, got=held, hint="Release the request's cache in the same step it "
                                                                  "ends, before step() returns.")
        pool_full_at_end(obs)


@pytest.mark.probe("trace", "endings")
def test_no_forward_after_finishing(observation):
    """A finished request is never fed to the model again and gets no output after its last."""
    with one_thread():
        obs = data(observation)
        reqs = per_request(obs)
        fed = rows_per_step(obs)
        for name, r in reqs.items():
            if r["finished_at"] is None:
                continue
            for i in range(r["finished_at"] + 1, len(obs["steps"])):
                if any(row[0] == name for row in fed[i]):
                    raise Fail(f"request {name!r} ended at step {r['finished_at']} but was fed to the model again "
                               f"at step {i}", hint="Remove a request from `running` the moment it ends.")
            if r["after_finish"]:
                raise Fail(f"request {name!r} got {r['after_finish']} output(s) after its final one",
                           hint="A finished request must never appear in a later step's outputs.")


@pytest.mark.probe("trace", "deadline")
def test_deadline_ends_running_and_waiting(observation):
    """A deadline ends the running request and the one still waiting; the pool is full after."""
    with one_thread():
        same_requests(observation, "deadline", ("tokens", "text", "finish", "finished_at"), "Before the forward, "
                      "end every request (running or waiting) whose clock() - arrival >= deadline: due exactly is "
                      "due, and a request that ends with no token has the text \"\".")
        pool_full_at_end(observation)


@pytest.mark.parametrize("trace", [
    case("model_error_ends_only_its_request", "error", probe=("trace", "error"), points=2),
    case("nan_logits_end_only_their_request", "nan", probe=("trace", "nan")),
    case("model_error_in_a_batch_of_two", "error_pair", probe=("trace", "error_pair")),
])
def test_a_failure_ends_only_its_request(observation, trace):
    """A forward that raises, or a NaN row, ends only the request that causes it, with `error`."""
    with one_thread():
        same_requests(observation, trace, ("tokens", "finish"), ERROR_HINT)
        pool_full_at_end(observation)


@pytest.mark.probe("trace", "partial_write")
def test_model_fails_after_writing_part_of_a_batch(observation):
    """A forward that writes the other requests' caches and then raises: the others run again
    alone from a fresh reservation and end as usual; only the broken request ends with `error`."""
    with one_thread():
        same_requests(observation, "partial_write", ("tokens", "finish"), PARTIAL_WRITE_HINT)
        pool_full_at_end(observation)


@pytest.mark.probe("trace", "half_character")
def test_half_character_never_streamed(observation):
    """A token that ends in the middle of a UTF-8 character: its "\ufffd" is never streamed; the
    whole character follows with the next token."""
    with one_thread():
        obs = data(observation)
        for i, step in enumerate(obs["steps"]):
            for name, _, delta, finish, _ in step["outputs"]:
                if finish is None and isinstance(delta, str) and delta.endswith("\ufffd"):
                    raise Fail(f"step {i} streamed {delta!r} for request {name!r}: a trailing \"\\ufffd\" (half a "
                               "character) was sent", expected="the delta without its trailing \"\\ufffd\"",
                               got=delta, hint=HALF_CHARACTER_HINT)
        same_requests(obs, "half_character", ("tokens", "text", "finish"), HALF_CHARACTER_HINT)


@pytest.mark.probe("trace", "include_stop")
def test_stop_kept_with_include_stop_str_in_output(observation):
    """include_stop_str_in_output keeps the stop token's text and the stop string in the text."""
    with one_thread():
        same_requests(observation, "include_stop", ("tokens", "text", "finish", "stop_reason"), INCLUDE_STOP_HINT)
        same_deltas(observation, "include_stop", "under include_stop_str_in_output nothing is held back",
                    INCLUDE_STOP_HINT)


@pytest.mark.probe("trace", "text_before_half_character")
def test_text_before_a_half_character_streams_at_once(observation):
    """A token holding whole characters and then half of one ("rld" + half of "\u4e2d"): its
    whole characters are streamed in its own step, the half character with the next token."""
    with one_thread():
        same_requests(observation, "text_before_half_character", ("tokens", "text", "finish"), SAFE_AT_ONCE_HINT)
        same_deltas(observation, "text_before_half_character", "each step streams all of its new safe text, "
                    "the characters before a trailing half character included", SAFE_AT_ONCE_HINT)


@pytest.mark.probe("trace", "held_before_half_character")
def test_stop_string_before_a_half_character_is_held(observation):
    """Text that may begin a stop string is held while half a character follows it ("Hello" +
    half of "\u4e2d", stop "o\u4e2d!"): each step's delta is the reference's, and the deltas
    joined are the final text."""
    with one_thread():
        obs = data(observation)
        records = obs.get("records")
        finals = records.get("finals") if isinstance(records, dict) else None
        for name, r in per_request(obs).items():      # engine.finished[id] holds the final text
            final = finals.get(name) if isinstance(finals, dict) else None
            if r["finish"] is not None and isinstance(final, list) and len(final) == 4 and final[1] != r["text"]:
                raise Fail(f"request {name!r} streamed {r['text']!r} in all, but its final text is {final[1]!r}: "
                           "the deltas of a request, joined, are its final text", expected=final[1], got=r["text"],
                           hint=HELD_BEFORE_HALF_HINT)
        same_requests(obs, "held_before_half_character", ("tokens", "text", "finish", "stop_reason"),
                      HELD_BEFORE_HALF_HINT)
        same_deltas(obs, "held_before_half_character", "the text before a trailing half character that may "
                    "begin a stop string is held back", HELD_BEFORE_HALF_HINT)


def same_deltas(observation, trace, why, hint):
    """Each step's text delta of each request equals the reference engine's."""
    got, want = data(observation)["steps"], expected(trace)["steps"]
    for i, (g, w) in enumerate(zip(got, want)):
        g_deltas = {o[0]: o[2] for o in g["outputs"]}
        for name, _, delta, _, _ in w["outputs"]:
            if g_deltas.get(name) != delta:
                raise Fail(f"step {i} streamed {g_deltas.get(name)!r} for request {name!r}: {why}", expected=delta,
                           got=g_deltas.get(name), hint=hint)


@pytest.mark.probe("trace", "held_at_the_end")
def test_held_text_sent_when_eos_or_stop_token_ends(observation):
    """Text held back for a stop string that never came is sent when EOS or a stop token ends the request."""
    with one_thread():
        same_requests(observation, "held_at_the_end", ("tokens", "text", "finish", "stop_reason"),
                      "At EOS the final text is the text of every token but the EOS; at a stop token, of every "
                      "token but that one: finish() streams what was held back (full_text[req.sent:]).")


RECORDS_HINT = ("finish() counts each ending in engine.finished_by_reason[str(reason)] and keeps "
                "engine.finished[req.id] = RequestOutput(req.id, list(req.tokens), full_text, reason, ...); "
                "schedule() counts each preemption in engine.preemptions and req.preemptions.")


@pytest.mark.parametrize("trace", [
    case("counts_and_final_outputs_after_preemptions", "preempt_twice", probe=("trace", "preempt_twice")),
    case("counts_and_final_outputs_after_timeouts", "deadline", probe=("trace", "deadline")),
])
def test_counts_and_final_outputs(observation, trace):
    """engine.preemptions, engine.finished_by_reason, req.preemptions and engine.finished[id] as the contract says."""
    with one_thread():
        got, want = data(observation)["records"], expected(trace)["records"]
        if not isinstance(got, dict):
            raise Fail("the probe returned an unexpected observation", got=got)
        for key, what in (("preemptions", "engine.preemptions"),
                          ("finished_by_reason", "engine.finished_by_reason"),
                          ("req_preemptions", "req.preemptions of each preempted request")):
            if got.get(key) != want[key]:
                raise Fail(f"after the trace, {what} differs from the reference engine", expected=want[key],
                           got=got.get(key), hint=RECORDS_HINT)
        for name, w in want["finals"].items():
            g = (got.get("finals") or {}).get(name)
            if g != w:
                raise Fail(f"engine.finished[{name!r}] is not the request's whole raw result",
                           expected=dict(zip(("tokens", "text", "finish_reason", "usage"), w)),
                           got=describe(g) if g is None else dict(zip(("tokens", "text", "finish_reason", "usage"), g)),
                           hint=RECORDS_HINT)

"""stream_generate(model, input_ids, ...): the hidden cases of the cell stream_holds_back_stop_prefixes."""
from __future__ import annotations

import pytest

from autograder.core import Fail
from autograder.reference import lab03 as ref

from .judging import HINTS, case, label_of
from .probes import CLOCK_START, STREAMS

pytestmark = pytest.mark.cell("stream_holds_back_stop_prefixes", points=1,
                              description="stream_generate never leaks a stop string and flushes held text")


def stream(name, hint=None, *, visible=False, points=1):
    return case(name, name, hint, probe=("streams", name), visible=visible, fixture=STREAMS[name][0]["fixture"],
                hint=hint, points=points)


@pytest.mark.parametrize("key, hint", [
    stream("two_token_stop_never_leaks", visible=True),
    stream("three_token_stop_never_leaks"),
    stream("diverging_match_is_released", "When '\\nUse' is followed by ' the', it can no longer become '\\nUser:': "
           "send it right away."),
    stream("overlapping_prefix_held_exactly"),
    stream("stop_inside_one_token"),
    stream("eos_and_length_streams"),
    stream("include_stop_str_needs_no_holdback", "With include_stop_str_in_output nothing can be trimmed later, so "
           "nothing is held."),
    stream("cancelled_or_failed_stream_flushes_held_text", "A run that ends without a stop string shows the held "
           "text: send it before finishing."),
    stream("stream_equals_generate_on_every_fixture", points=2),
])
def test_stream(observation, key, hint):
    """Never a held stop prefix while running, held text released as soon as it cannot match, and the
    deltas joined equal generate(...).text."""
    for spec, got in zip(STREAMS[key], observation):
        label = label_of(spec)
        exp = ref.expected_run(spec, CLOCK_START)
        safe = ref.safe_emissions(spec)
        if got["raised"] is not None:
            raise Fail(f"{label}: the stream raised {got['raised']['__raised__']}: {got['raised']['message']}",
                       hint="Errors during generation end the stream normally (finish_reason 'error').")
        if got["bad"]:
            raise Fail(f"{label}: every delta must be a str", got=got["bad"][0])
        sent = ""
        for delta, calls in zip(got["deltas"], got["at_yield"]):
            sent += delta
            allowed = safe[calls] if calls < exp["calls"] and calls < len(safe) else exp["text"]
            if not allowed.startswith(sent):
                if calls >= exp["calls"]:  # the run is over: this is the final flush
                    raise Fail(f"{label}: when the run ended, the stream sent text that is not in "
                               f"generate(...).text", expected=f"a prefix of {allowed!r}", got=sent,
                               hint="The final flush sends only the rest of the FINAL text: trimmed at the "
                                    "stop string (or the blocked token), not the held raw text.")
                raise Fail(f"{label}: after {calls} model calls the stream had sent text it may not send yet",
                           expected=f"a prefix of {allowed!r}", got=sent,
                           hint=hint or "Hold back the longest suffix of the raw text that is a proper prefix "
                                        "of a stop string, over all tokens so far (not just the last).")
        if "".join(got["deltas"]) != exp["text"]:
            raise Fail(f"{label}: the joined deltas differ from generate(...).text", expected=exp["text"],
                       got="".join(got["deltas"]),
                       hint=hint or "At the end, send whatever is left of the final text (held text included).")
        if len(got["seen"]) != exp["calls"]:
            raise Fail(f"{label}: the stream called the model {len(got['seen'])} times", expected=exp["calls"],
                       got=len(got["seen"]), hint=HINTS["calls"])
        for k, seen in enumerate(got["seen"]):
            if seen != safe[k]:
                raise Fail(f"{label}: before model call {k} the client had received {seen!r}",
                           expected=safe[k], got=seen,
                           hint=hint or "Yield each token's safe text before asking the model for the next "
                                        "token, and release held text as soon as it cannot start a stop string.")

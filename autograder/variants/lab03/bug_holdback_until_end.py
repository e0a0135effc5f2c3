"""Plays safe by not streaming at all when stop strings are set: it waits for the whole
generation and sends the final text in one piece. Nothing leaks, but the client sees
nothing until the end, even text that could never become a stop string."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"stream_holds_back_stop_prefixes": ["two_token_stop_never_leaks", "diverging_match_is_released"]}


_stream = stream_generate   # the solution's, kept before it is replaced


def stream_generate(model, input_ids, **kwargs):
    if kwargs.get("stop"):                      # BUG: no streaming at all once stop strings are set
        yield generate(model, input_ids, **kwargs).text
        return
    yield from _stream(model, input_ids, **kwargs)

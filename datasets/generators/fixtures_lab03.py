"""Lab 03 fixtures: a banned word, stop strings that overlap or sit inside one token,
and tool calls that break their schema, name a forbidden tool, or are cut mid-number."""
from __future__ import annotations

import random

from fixture_lib import EOS, fixture, scripted


def _call(tool, args_pieces):
    """Token pieces of {"tool": "<tool>", "args": {<args>}}."""
    return ['{"', "tool", '":', ' "', tool, '",', ' "', "args", '":', " {"] + list(args_pieces) + ["}"]


WEATHER = ['"', "city", '":', ' "']
ATLANTIS = _call("get_weather", WEATHER + ["Atlantis", '"}'])
THIRTY_DAYS = _call("get_weather", WEATHER + ["Paris", '",', ' "', "days", '":', " 30", "}"])
BAD_JSON = _call("get_weather", WEATHER + ["Paris", '",', "}"])            # trailing comma
DELETE = _call("delete_file", ['"', "path", '":', ' "', "notes.txt", '"}'])
TRANSFER = _call("transfer", ['"', "to", '":', ' "', "alice", '",', ' "', "amount", '":', " 10", "00", "}"])

def _coin_flips():
    # Near-equal ' heads' / ' tails' at every step, EOS very unlikely: a sampled run depends
    # on its seed, so replaying it without the seed gives different tokens.
    rng = random.Random(49)
    vocab = [EOS, "<prompt>", " heads", " tails"]
    steps = [[-8.0, -8.0, rng.gauss(0.0, 0.3), rng.gauss(0.0, 0.3)] for _ in range(8)]
    return fixture("sampled_coin_flips", "Eight near-fair ' heads'/' tails' steps: sampled runs depend on the seed.",
                   ["sampling", "replay", "seed"], vocab, steps, eos_token_id=0, prompt_ids=[1],
                   params={"max_tokens": 6})


FIXTURES = [
    _coin_flips(),
    scripted("content_filter_banned_word", "The banned word ' swordfish' arrives as one token at step 3.",
             ["content_filter", "finish_reason"], [" The", " password", " is", " swordfish", "."], seed=40,
             extra_vocab=[" hidden"], params={"max_tokens": 16, "banned_words": ["swordfish"]}),
    scripted("stop_string_overlap", "'\\n\\nQ:' after three newlines: the holdback must restart inside a match.",
             ["stop_string", "holdback", "streaming"],
             [" Answer", ":", " 42", "\n", "\n", "\n", "Q", ":", " next"], seed=41,
             params={"stop": ["\n\nQ:"], "max_tokens": 16}),
    scripted("stop_string_inside_token", "The stop string '\\n\\n' sits inside one token with text after it.",
             ["stop_string", "streaming"], [" one", " two", " three\n\nfour", " five"], seed=42,
             params={"stop": ["\n\n"], "max_tokens": 16}),
    scripted("tool_call_enum_violation", "A complete tool call whose city 'Atlantis' is not in the enum.",
             ["structured_output", "schema"], ATLANTIS, seed=43, prompt=("Call:",), params={"max_tokens": 32}),
    scripted("tool_call_out_of_range", "A complete tool call asking for days=30 (allowed 1..7).",
             ["structured_output", "schema"], THIRTY_DAYS, seed=44, prompt=("Call:",), params={"max_tokens": 32}),
    scripted("tool_call_bad_json", "A tool call with a trailing comma: finish_reason stop, but not JSON.",
             ["structured_output", "parse"], BAD_JSON, seed=45, prompt=("Call:",), params={"max_tokens": 32}),
    scripted("tool_call_not_permitted", "A schema-valid call of delete_file, a tool not on the allow-list.",
             ["structured_output", "permission"], DELETE, seed=46, prompt=("Call:",), params={"max_tokens": 32}),
    scripted("tool_call_transfer", "A complete transfer of amount 1000 (' 10' + '00'), then EOS.",
             ["structured_output", "side_effect"], TRANSFER, seed=47, prompt=("Call:",), params={"max_tokens": 32}),
    scripted("transfer_cut_by_max_tokens",
             "The transfer cut after ' 10': closing its brackets would send 10 instead of 1000.",
             ["structured_output", "max_tokens", "side_effect"], TRANSFER, seed=48, prompt=("Call:",),
             params={"max_tokens": 20}),
]

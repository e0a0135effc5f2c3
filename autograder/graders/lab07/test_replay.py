"""replay_in_engine (Lab 03's saved failure samples through the engine): the hidden cases of the
cell failure_samples_replay_through_the_engine."""
from __future__ import annotations

import pytest

from autograder.checks import one_thread
from autograder.core import Fail, describe, is_raised
from autograder.reference import lab07 as ref

from .judging import case
from .probes import replay_record, sample

pytestmark = pytest.mark.cell("failure_samples_replay_through_the_engine",
                              description="Lab 03's saved failure samples, replayed through the engine")


@pytest.mark.parametrize("reason, seeded", [
    case("replays_length", "length", False, probe=("replay", "length"), visible=True),
    case("replays_cancelled", "cancelled", False, probe=("replay", "cancelled")),
    case("replays_timeout", "timeout", False, probe=("replay", "timeout")),
    case("replays_error", "error", False, probe=("replay", "error")),
    case("replays_seeded_sample", "length", True, probe=("replay", "length", True)),
    case("content_filter_sample_is_not_replayable", "content_filter", False, probe=("replay", "content_filter")),
])
def test_replay(observation, reason, seeded):
    """The saved sample's tokens, streamed text, finish reason and an empty pool after; None for a filter."""
    with one_thread():
        judge(observation, sample(reason, seeded), f"the saved `{reason}` sample", REPLAY_HINT)


VARIANT_HINTS = {
    "cancel_at_0": "cancel_at 0: abort right after add_request, before the first step; the request ends "
                   "\"cancelled\" with no token.",
    "nan": "Pass inject's nan_at to ScriptedBatchedModel.from_fixture (as well as raise_at): NaN logits end "
           "the request with `error`.",
    "banned_token_ids": "A record that needs a content filter (banned_words OR banned_token_ids in its inject) "
                        "is not replayable: return None.",
    "greedy_coin_flips": "seed None means greedy: temperature 0 (only a seeded record samples, at temperature 1.0).",
    "other_seed": "A seeded record samples at temperature 1.0 with its own seed (no other temperature).",
    "no_cost": "A record without seconds_per_call costs no time per forward (SimulatedCost with fixed=0.0): "
               "its deadline never fires.",
}


@pytest.mark.parametrize("kind", [
    case("replays_cancel_before_the_first_step", "cancel_at_0", probe=("replay_variant", "cancel_at_0")),
    case("replays_nan_logits", "nan", probe=("replay_variant", "nan")),
    case("banned_token_ids_sample_is_not_replayable", "banned_token_ids",
         probe=("replay_variant", "banned_token_ids")),
    case("replays_greedy_when_seed_is_none", "greedy_coin_flips", probe=("replay_variant", "greedy_coin_flips")),
    case("replays_another_seed_at_temperature_1", "other_seed", probe=("replay_variant", "other_seed")),
    case("replays_without_a_cost_per_call", "no_cost", probe=("replay_variant", "no_cost")),
])
def test_replay_built_record(observation, kind):
    """A record built from a saved sample for a clause the saved ones leave out (replay_record)."""
    with one_thread():
        judge(observation, replay_record(kind), f"a record built from a saved sample ({kind})", VARIANT_HINTS[kind])


REPLAY_HINT = ("Build the model with ScriptedBatchedModel.from_fixture, the clock cost with SimulatedCost, abort at "
               "cancel_at tokens, and join the streamed text deltas.")


def judge(observation, record, what, hint):
    """The student's replay of `record` against the reference's."""
    if not isinstance(observation, dict) or "result" not in observation:
        raise Fail("the probe returned an unexpected observation", got=describe(observation))
    got = observation["result"]
    if is_raised(got):
        raise Fail(f"replay_in_engine on {what} raised {got['__raised__']}: {got['message']}", hint=hint)
    want = ref.replay_in_engine(ref.Engine, record)
    if want is None:
        if got is not None:
            raise Fail("a sample that needs a content filter must be reported as not replayable (None)",
                       expected=None, got=describe(got), hint=hint)
        return
    if not isinstance(got, dict):
        raise Fail("replay_in_engine should return a dict", expected=sorted(want), got=describe(got))
    for k in ("tokens", "finish_reason", "text", "kv_blocks_used_after"):
        if got.get(k) != want[k]:
            raise Fail(f"replaying {what}: `{k}` is wrong", expected=want[k], got=got.get(k), hint=hint)

"""replay_in_engine (Lab 03's saved failure samples through the engine): the hidden cases of the
cell failure_samples_replay_through_the_engine."""
from __future__ import annotations

import pytest

from autograder.checks import one_thread
from autograder.core import Fail, describe, is_raised
from autograder.reference import lab07 as ref

from .judging import case
from .probes import sample

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
        if not isinstance(observation, dict) or "result" not in observation:
            raise Fail("the probe returned an unexpected observation", got=describe(observation))
        got = observation["result"]
        if is_raised(got):
            raise Fail(f"replay_in_engine on the `{reason}` sample raised {got['__raised__']}: {got['message']}")
        want = ref.replay_in_engine(ref.Engine, sample(reason, seeded))
        if want is None:
            if got is not None:
                raise Fail("a sample that needs a content filter must be reported as not replayable (None)",
                           expected=None, got=describe(got))
            return
        if not isinstance(got, dict):
            raise Fail("replay_in_engine should return a dict", expected=sorted(want), got=describe(got))
        for k in ("tokens", "finish_reason", "text", "kv_blocks_used_after"):
            if got.get(k) != want[k]:
                raise Fail(f"replaying the saved `{reason}` sample: `{k}` is wrong", expected=want[k],
                           got=got.get(k), hint="Build the model with ScriptedBatchedModel.from_fixture, the clock "
                                                "cost with SimulatedCost, abort at cancel_at tokens, and join the "
                                                "streamed text deltas.")

"""course.engine never waits forever.

The rule (stated in course/engine.py and Lab 07): a request is refused at once when it
could not run even alone in an empty pool, blocks_needed(prompt + max_tokens - 1) >
num_blocks; every other request finishes. The watermark holds blocks back only while
something is running. These tests drive the engine on ScriptedBatchedModel over random
small configurations and request streams (hypothesis, derandomized) and check, step by
step: no step holds more blocks than the pool; every request ends within a step bound;
the pool is empty at the end; refusals happen exactly for requests that could never fit.

The step bound: each step that has a running request gives its OLDEST running request a
token (it is never preempted and always fits alone), and a step with nothing running
admits the head of the queue; preempted requests keep their tokens. So once the last
request has arrived, at most sum(max_tokens of the accepted requests) steps remain.
"""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from course import FakeClock
from course.batched import ScriptedBatchedModel
from course.engine import Engine, EngineConfig, RequestParams, RequestRefused, drain
from course.paged_kv import blocks_needed

pytestmark = pytest.mark.usefixtures("one_thread")  # fixture in conftest.py

VOCAB = ["<e>"] + [f"w{i}" for i in range(1, 12)]
EOS = 0


def model_for(prompts):
    """A scripted model that never says EOS for these prompts (ids 1..11, no 0)."""
    scripts = {tuple(p): [1 + (i + k) % 11 for k in range(64)] for i, p in enumerate(prompts)}
    return ScriptedBatchedModel(VOCAB, scripts, eos_token_id=EOS)


def test_the_preempted_request_comes_back():
    """Pool 6 x 1 token, watermark 2: (prompt 1, max 5) and (prompt 3, max 4), then (prompt 3,
    max 2) after one step. The second is preempted and returns needing 5 blocks: 5 + the
    watermark of 2 > 6, so a scheduler that keeps the watermark with nothing running would
    leave it (and the third, behind it) waiting forever on an empty pool."""
    prompts = [[1], [2, 2, 2], [3, 3, 3]]
    engine = Engine(model_for(prompts), None, EngineConfig(num_blocks=6, block_size=1, watermark_blocks=2),
                    clock=FakeClock())
    a = engine.add_request(prompts[0], RequestParams(temperature=0, max_tokens=5))
    b = engine.add_request(prompts[1], RequestParams(temperature=0, max_tokens=4))
    engine.step()
    c = engine.add_request(prompts[2], RequestParams(temperature=0, max_tokens=2))
    done = drain(engine, max_steps=5 + 4 + 2)
    assert {r: str(done[r].finish_reason) for r in (a, b, c)} == {a: "length", b: "length", c: "length"}
    assert engine.stats()["preemptions"] >= 1, "the case is meant to preempt the second request"
    assert engine.pool.allocator.num_used == 0


def test_refused_exactly_when_it_cannot_run_alone():
    engine = Engine(model_for([[1]]), None, EngineConfig(num_blocks=6, block_size=2, watermark_blocks=3),
                    clock=FakeClock())
    # 1 + 12 - 1 = 12 tokens: 6 blocks = the whole pool. The watermark does not count: it runs alone.
    rid = engine.add_request([1], RequestParams(temperature=0, max_tokens=12))
    assert str(drain(engine, max_steps=12)[rid].finish_reason) == "length"
    with pytest.raises(RequestRefused, match="13 tokens"):
        engine.add_request([1], RequestParams(temperature=0, max_tokens=13))   # 7 blocks > 6


request = st.tuples(st.integers(0, 6),            # arrival step
                    st.integers(1, 9),            # prompt length
                    st.integers(1, 10),           # max_tokens
                    st.one_of(st.none(), st.integers(0, 12)))   # abort after this step, or never


class WatermarkAlwaysEngine(Engine):
    """The hang: the watermark is kept even when nothing runs, so a preempted request that
    came back bigger than num_blocks - watermark never gets in again."""

    def _blocks_kept_back(self) -> int:
        return self.config.watermark_blocks


configs = dict(num_blocks=st.integers(2, 12), block_size=st.integers(1, 4), watermark=st.integers(0, 3),
               max_batch=st.integers(1, 4), requests=st.lists(request, min_size=1, max_size=8))
PROPERTY = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(**configs)
def test_every_request_ends_within_the_bound(num_blocks, block_size, watermark, max_batch, requests):
    drive(Engine, num_blocks, block_size, watermark, max_batch, requests)


def test_the_property_catches_an_engine_that_hangs():
    @PROPERTY
    @given(**configs)
    def hanging(num_blocks, block_size, watermark, max_batch, requests):
        drive(WatermarkAlwaysEngine, num_blocks, block_size, watermark, max_batch, requests)

    with pytest.raises(AssertionError, match="past the bound"):
        hanging()


def drive(engine_cls, num_blocks, block_size, watermark, max_batch, requests):
    """Run one random stream through a fresh engine of engine_cls, checking as it goes."""
    watermark = min(watermark, num_blocks - 1)
    config = EngineConfig(num_blocks=num_blocks, block_size=block_size, max_batch=max_batch,
                          watermark_blocks=watermark)
    prompts = [[1 + (i + k) % 11 for k in range(n)] for i, (_, n, _, _) in enumerate(requests)]
    engine = engine_cls(model_for(prompts), None, config, clock=FakeClock())
    ids, budget = {}, 0                             # request index -> id; sum of accepted max_tokens
    last_arrival = max(r[0] for r in requests)
    ended, step = set(), 0
    while True:
        for i, (at, n, max_tokens, _) in enumerate(requests):
            if at != step:
                continue
            fits = blocks_needed(n + max_tokens - 1, block_size) <= num_blocks
            try:
                ids[i] = engine.add_request(prompts[i], RequestParams(temperature=0, max_tokens=max_tokens))
                budget += max_tokens
                assert fits, f"request {i} can never fit the pool but was accepted"
            except RequestRefused:
                assert not fits, f"request {i} fits the pool alone but was refused"
        for i, (_, _, _, abort_after) in enumerate(requests):
            if abort_after == step and i in ids:
                engine.abort(ids[i])
                ended.add(ids[i])
        if step > last_arrival and not engine.has_unfinished():
            break
        outs = engine.step()
        used = engine.pool.allocator.num_used
        assert used <= num_blocks, f"step {step} holds {used} blocks of a pool of {num_blocks}"
        assert sum(len(r.cache.block_table) for r in engine.running) == used, \
            "blocks in use must be exactly the running requests' blocks"
        for out in outs:
            if out.finished:
                ended.add(out.request_id)
        step += 1
        assert step <= last_arrival + 1 + budget, (
            f"step {step}: requests still unfinished past the bound (last arrival {last_arrival} "
            f"+ sum(max_tokens) {budget}); running {engine.running}, waiting {list(engine.waiting)}")
    assert ended == set(ids.values())
    assert engine.pool.allocator.num_used == 0

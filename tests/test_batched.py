"""course.batched: one forward for many paged-cache requests must compute, row by row,
what each request computes alone (tiny model: same greedy tokens, logits within 1e-4);
the scripted batched model and the cost model keep their documented contracts."""
import math

import pytest
import torch

from course import FakeClock
from course.batched import BatchedDecoder, ScriptedBatchedModel, SimulatedCost, as_batched, solo_greedy
from course.decoder import CourseDecoder
from course.paged_kv import OutOfBlocks, PagedKVCache
from course.scripted import ScriptedModelError
from course.tiny_model import LAB_PROMPTS, TINY_MODEL_DIR

ATOL = 1e-4
pytestmark = pytest.mark.usefixtures("one_thread")  # fixture in conftest.py


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(TINY_MODEL_DIR, local_files_only=True)


@pytest.fixture(scope="module")
def decoder():
    return CourseDecoder.from_pretrained(TINY_MODEL_DIR, device="cpu")


@pytest.fixture(scope="module")
def prompts(tokenizer):
    return [tokenizer(p).input_ids for p in LAB_PROMPTS[::3]]   # 8 prompts of different lengths


def test_staggered_batch_equals_each_request_alone(decoder, prompts):
    """Requests join one step apart, so every batch mixes one prefill with decodes."""
    model = BatchedDecoder(decoder)
    n = 12
    solo = [solo_greedy(decoder, p, n) for p in prompts]
    pool = model.new_pool(num_blocks=120, block_size=4)
    caches = [PagedKVCache(pool) for _ in prompts]
    tokens = [[] for _ in prompts]
    worst = 0.0
    for step in range(len(prompts) + n):
        rows = [i for i in range(min(step + 1, len(prompts))) if len(tokens[i]) < n]
        if not rows:
            break
        logits = model.forward_batch([prompts[i] + tokens[i] for i in rows], [caches[i] for i in rows])
        assert logits.shape == (len(rows), decoder.config.vocab_size)
        for row, i in enumerate(rows):
            k = len(tokens[i])
            worst = max(worst, (logits[row] - solo[i][1][k]).abs().max().item())
            tokens[i].append(int(logits[row].argmax()))
    assert tokens == [s[0] for s in solo]
    assert worst < ATOL
    assert [c.length for c in caches] == [len(p) + n - 1 for p in prompts]


def test_recompute_after_release_gives_the_same_next_token(decoder, prompts):
    """A preempted request feeds prompt + generated tokens again into an empty cache."""
    model = BatchedDecoder(decoder)
    tokens, logits = solo_greedy(decoder, prompts[1], 6)
    pool = model.new_pool(num_blocks=40, block_size=4)
    other, again = PagedKVCache(pool), PagedKVCache(pool)
    model.forward_batch([prompts[0]], [other])
    out = model.forward_batch([prompts[0] + [5], prompts[1] + tokens[:5]], [other, again])
    assert int(out[1].argmax()) == tokens[5]
    assert (out[1] - logits[5]).abs().max().item() < ATOL
    assert again.length == len(prompts[1]) + 5


def test_single_row_equals_the_decoder_without_cache(decoder, prompts):
    ids = prompts[2]
    model = BatchedDecoder(decoder)
    cache = PagedKVCache(model.new_pool(8, 16))
    got = model.forward_batch([ids], [cache])[0]
    want = decoder(torch.tensor([ids]))[0, -1]
    assert (got - want).abs().max().item() < ATOL


def test_pool_blocks_follow_the_tokens(decoder, prompts):
    model = BatchedDecoder(decoder)
    pool = model.new_pool(num_blocks=10, block_size=4)
    caches = [PagedKVCache(pool), PagedKVCache(pool)]
    model.forward_batch([[1, 2, 3, 4, 5], [7, 8]], caches)
    assert [len(c.block_table) for c in caches] == [2, 1]
    assert pool.allocator.num_free == 7
    for c in caches:
        c.release()
    assert pool.allocator.num_free == 10


def test_out_of_blocks_is_raised_not_hidden(decoder):
    model = BatchedDecoder(decoder)
    cache = PagedKVCache(model.new_pool(num_blocks=1, block_size=2))
    with pytest.raises(OutOfBlocks):
        model.forward_batch([[1, 2, 3]], [cache])


@pytest.mark.parametrize("token_ids, message", [
    ([], "non-empty list"),
    ([[1, 2], [3]], "one cache per row"),
    ([[1, 99999]], "ids in"),
])
def test_bad_rows_are_rejected(decoder, token_ids, message):
    model = BatchedDecoder(decoder)
    pool = model.new_pool(4, 4)
    with pytest.raises(ValueError, match=message):
        model.forward_batch(token_ids, [PagedKVCache(pool)])


def test_a_row_with_nothing_new_is_rejected(decoder):
    model = BatchedDecoder(decoder)
    cache = PagedKVCache(model.new_pool(4, 4))
    model.forward_batch([[1, 2]], [cache])
    with pytest.raises(ValueError, match="must hold a token its cache lacks"):
        model.forward_batch([[1, 2]], [cache])


def test_as_batched():
    with pytest.raises(ValueError, match="CourseDecoder or a batched model"):
        as_batched(object())
    scripted = ScriptedBatchedModel(["a", "b"], {(0,): [1]})
    assert as_batched(scripted) is scripted


# ---------------------------------------------------------------- the scripted model

def scripted(**kw):
    return ScriptedBatchedModel(["<e>", "a", "b", "c"], {(1,): [2, 3, 0], (2, 2): [1, 1]}, eos_token_id=0, **kw)


def test_scripted_model_plays_each_script_greedily():
    model = scripted()
    pool = model.new_pool(8, 2)
    c1, c2 = PagedKVCache(pool), PagedKVCache(pool)
    out = model.forward_batch([[1], [2, 2]], [c1, c2])
    assert out.argmax(-1).tolist() == [2, 1]
    out = model.forward_batch([[1, 2], [2, 2, 1]], [c1, c2])
    assert out.argmax(-1).tolist() == [3, 1]
    assert (c1.length, c2.length) == (2, 3)
    assert model.calls == [[((1,), 0, 1), ((2, 2), 0, 2)], [((1,), 1, 1), ((2, 2), 2, 1)]]
    assert model.decode([1, 2, 0]) == "ab<e>"


def test_scripted_model_failures():
    pool = scripted().new_pool(8, 2)
    with pytest.raises(ScriptedModelError, match="injected"):
        scripted(raise_at={(1,): 1}).forward_batch([[1, 2]], [PagedKVCache(pool)])
    out = scripted(nan_at={(2, 2): 0}).forward_batch([[1], [2, 2]], [PagedKVCache(pool), PagedKVCache(pool)])
    assert not torch.isnan(out[0]).any() and torch.isnan(out[1]).all()
    with pytest.raises(ScriptedModelError, match="miss a stop condition"):
        scripted().forward_batch([[2, 2, 1, 1]], [PagedKVCache(pool)])
    with pytest.raises(ScriptedModelError, match="no script"):
        scripted().forward_batch([[3]], [PagedKVCache(pool)])


def test_simulated_cost_charges_fixed_plus_per_token():
    clock = FakeClock()
    model = SimulatedCost(scripted(), clock, fixed=1.0, per_token=0.25)
    pool = model.new_pool(8, 2)
    c1, c2 = PagedKVCache(pool), PagedKVCache(pool)
    model.forward_batch([[1], [2, 2]], [c1, c2])
    assert clock() == pytest.approx(1.0 + 0.25 * 3)
    model.forward_batch([[1, 2]], [c1])
    assert clock() == pytest.approx(1.75 + 1.25)
    assert model.tokens_per_call == [3, 1]
    assert model.vocab_size == 4 and model.eos_token_id == 0
    with pytest.raises(ValueError, match="FakeClock"):
        SimulatedCost(scripted(), lambda: 0.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="`per_token` must be"):
        SimulatedCost(scripted(), clock, 1.0, -1)
    assert math.isfinite(clock())


def test_any_course_cache_works_through_the_generic_view(decoder, prompts):
    """Caches that are not on one KVPool (here the growing KVCache) go through the
    per-row path and give the same tokens as the paged path."""
    from course.kv_cache import KVCache
    model = BatchedDecoder(decoder)
    rows = [prompts[0], prompts[3], prompts[5]]
    growing = [KVCache(decoder.config.n_layer) for _ in rows]
    pool = model.new_pool(num_blocks=40, block_size=4)
    paged = [PagedKVCache(pool) for _ in rows]
    a, b = model.forward_batch(rows, growing), model.forward_batch(rows, paged)
    assert (a - b).abs().max().item() < ATOL
    nxt = [r + [int(t)] for r, t in zip(rows, a.argmax(-1))]
    a, b = model.forward_batch(nxt, growing), model.forward_batch(nxt, paged)
    assert a.argmax(-1).tolist() == b.argmax(-1).tolist()
    assert [c.length for c in growing] == [c.length for c in paged] == [len(r) for r in nxt]


def test_fast_paged_path_computes_what_the_decoder_computes(decoder, prompts):
    """BatchedDecoder._run_paged (a plain CourseDecoder on one pool) against the decoder's
    own _run through the same paged view: a mixed batch of prefills, a decode and a
    recompute gives the same next tokens, logits within ATOL, and the same pool contents."""
    from course.batched import _PagedBatchView
    model = BatchedDecoder(decoder)
    fast_pool, slow_pool = model.new_pool(60, 4), model.new_pool(60, 4)
    fast = [PagedKVCache(fast_pool) for _ in range(3)]
    slow = [PagedKVCache(slow_pool) for _ in range(3)]
    for c in (fast[0], slow[0]):                     # row 0 has a cached prompt: it decodes
        model.forward_batch([prompts[0]], [c])
    rows = [prompts[0] + [7], prompts[1], prompts[4] + [3, 9]]
    got = model.forward_batch(rows, fast)

    past = [c.length for c in slow]
    n_new = [len(r) - p for r, p in zip(rows, past)]
    t, width = max(n_new), max(len(r) for r in rows)
    ids = torch.tensor([[0] * (t - n) + r[p:] for r, p, n in zip(rows, past, n_new)])
    mask = torch.arange(width) >= (width - torch.tensor([len(r) for r in rows]))[:, None]
    view = _PagedBatchView(slow, past, n_new, width, t)
    want = decoder._run(ids, view, mask)[:, -1]
    assert got.argmax(-1).tolist() == want.argmax(-1).tolist()
    assert (got - want).abs().max().item() < ATOL
    assert [c.block_table for c in fast] == [c.block_table for c in slow]
    assert (fast_pool.k - slow_pool.k).abs().max().item() < ATOL
    assert (fast_pool.v - slow_pool.v).abs().max().item() < ATOL


def test_a_subclassed_decoder_takes_the_generic_path(decoder, prompts):
    """Only a plain CourseDecoder gets the fast path: a subclass may change the network."""
    class Doubled(CourseDecoder):
        def _run(self, ids, kv, mask):
            return 2 * super()._run(ids, kv, mask)
    twin = Doubled(decoder.config)
    twin.load_state_dict(decoder.state_dict())
    a, b = BatchedDecoder(decoder), BatchedDecoder(twin)
    pa, pb = a.new_pool(20, 4), b.new_pool(20, 4)
    la = a.forward_batch([prompts[2]], [PagedKVCache(pa)])
    lb = b.forward_batch([prompts[2]], [PagedKVCache(pb)])
    assert (lb - 2 * la).abs().max().item() < 2 * ATOL

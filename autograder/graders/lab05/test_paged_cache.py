"""PagedKVCache: the hidden cases of the cell paged_cache_matches_static."""
from __future__ import annotations

import functools
from unittest import mock

import pytest
import torch

from autograder import memo
from autograder.rounding import LOGIT_ATOL
from autograder.checks import one_thread
from autograder.core import Fail, as_tensor, close, describe, to_plain
from autograder.reference import lab05 as ref

from ._inputs import keys
from . import probes
from .judging import observed

def on_reference_first(probe_name):
    """Judge the same probe run on the reference's KVPool and PagedKVCache first (grader
    integrity, as checks.reference_rejects: a case the reference fails is a fault of the grader),
    then the student's observation."""
    def wrap(test):
        @functools.wraps(test)
        def judged(observation):
            ns = {"KVPool": ref.KVPool, "PagedKVCache": ref.PagedKVCache, "BlockAllocator": ref.BlockAllocator}
            with mock.patch.object(probes, "function", lambda ns, name: ns[name]):   # the reference is not a student
                replayed = to_plain(getattr(probes, probe_name)(ns))
            try:
                test(replayed)
            except Fail as e:
                raise Fail(f"grader error: the reference's PagedKVCache fails this case ({e})",
                           hint="This is a fault in the grader, not in your code: tell the course staff.") from None
            test(observation)
        return judged
    return wrap


pytestmark = pytest.mark.cell("paged_cache_matches_static",
                              description="PagedKVCache: the decoder runs on it unchanged; blocks on demand, in "
                                          "table order")


def judge_parity(obs, block_size, prompt_index, steps):
    """The tiny model's greedy tokens and logits on the student's cache equal StaticKVCache's;
    length, blocks held, bytes and release() agree with the reference's arithmetic."""
    observed(obs, "tokens", "rows", "length", "table", "bytes", "free_after_release")
    with one_thread():
        # StaticKVCache's run, kept in _expected.pt (autograder/memo.py: no model load here)
        want_run = memo.expected("lab05", f"static_greedy_{prompt_index}_{steps}")
        tokens, rows = want_run["tokens"], want_run["rows"]
        n_layer, n_head, head_dim = want_run["sizes"]
        if obs["tokens"] != tokens:
            raise Fail(f"greedy tokens on the tiny model (block_size={block_size}) differ from StaticKVCache",
                       expected=tokens, got=obs["tokens"],
                       hint="append must write the new keys/values at positions length .. length+t-1 and return "
                            "every token of that layer in order.")
        close(as_tensor(obs["rows"]), rows, atol=LOGIT_ATOL, rtol=0, what="the logits",
              hint="The paged cache must give back exactly what was written.")
        n = want_run["prompt_length"] + steps
        need = ref.blocks_needed(n, block_size)
        block_bytes = block_size * ref.kv_bytes_per_token(n_layer, n_head, head_dim, 4)
        got = [obs["length"], obs["table"], obs["bytes"], obs["free_after_release"]]
        want = [n, need, need * block_bytes, 64]
        if got != want:
            raise Fail("[length, blocks held, bytes_allocated(), free blocks after release()] are wrong",
                       expected=want, got=got,
                       hint="Hold exactly ceil(length / block_size) blocks; bytes_allocated counts whole blocks; "
                            "release() gives every block back.")


@pytest.mark.probe("parity", 4, 0, 16)
@pytest.mark.cell(visible=True, points=2)
def test_tiny_model_parity_block_4(observation):
    """Greedy decoding of the tiny model on blocks of 4: StaticKVCache's tokens and logits."""
    judge_parity(observation, 4, 0, 16)


@pytest.mark.probe("parity_pair", [1, 1, 12], [16, 2, 20])
def test_tiny_model_parity_block_1_and_16(observation):
    """The same with blocks of 1 and of 16 (other prompts and lengths)."""
    if not isinstance(observation, list) or len(observation) != 2:
        raise Fail("the probe returned an unexpected observation", got=describe(observation))
    judge_parity(observation[0], 1, 1, 12)
    judge_parity(observation[1], 16, 2, 20)


@pytest.mark.probe("fragmented")
@pytest.mark.cell(points=2)
@on_reference_first("fragmented")
def test_gather_follows_the_block_table(observation):
    """Two sequences interleaved, then blocks reused: gather in block-table order, not id order."""
    observed(observation, "k", "v")
    want = torch.cat([keys(9), keys(3, 100)], dim=2)
    close(as_tensor(observation["k"]), want, atol=0, rtol=0, what="the keys returned by append",
          hint="Gather the blocks in block-table order (position p is in block_table[p // block_size]), "
               "not in order of block id.")
    close(as_tensor(observation["v"]), -want, atol=0, rtol=0, what="the values returned by append")


@pytest.mark.probe("descending_blocks")
@on_reference_first("descending_blocks")
def test_gather_when_block_ids_descend(observation):
    """Blocks 3, 2, 1 taken in that order (one free at a time): gather follows the table, not the ids."""
    observed(observation, "table", "k", "v", "gathered")
    hint = ("Every block of a pool of 4 was taken, then blocks 3, 2 and 1 were given back one at a time, each "
            "just before the cache needed a new block, so the block table is [3, 2, 1] whatever order your "
            "allocator hands ids out in. Token p is in block_table[p // block_size]: read the blocks in table "
            "order, never in order of id (sorted or not).")
    if observation["table"] != [3, 2, 1]:
        raise Fail("block_table after 6 tokens (blocks of 2) taken from blocks freed in the order 3, 2, 1 is wrong",
                   expected=[3, 2, 1], got=observation["table"],
                   hint="block_table lists the ids in token order: the block of tokens 0-1 first.")
    close(as_tensor(observation["k"]), keys(6), atol=0, rtol=0, what="the keys returned by append", hint=hint)
    close(as_tensor(observation["v"]), -keys(6), atol=0, rtol=0, what="the values returned by append", hint=hint)
    close(as_tensor(observation["gathered"][0]), keys(6), atol=0, rtol=0, what="the keys of gather(0)", hint=hint)


@pytest.mark.probe("length_mid_forward")
@on_reference_first("length_mid_forward")
def test_length_is_what_every_layer_holds(observation):
    """length is the smallest per-layer count: mid-forward it is still the old length."""
    want = [0, 3, 3, 5]
    if observation != want:
        raise Fail("length after each append (3 tokens at layer 0, then layer 1; 2 more at layer 0, then "
                   "layer 1) is wrong", expected=want, got=observation,
                   hint="length is the number of tokens EVERY layer holds, the smallest per-layer count: after "
                        "layer 0 has taken new tokens and layer 1 has not, length has not grown yet.")


@pytest.mark.probe("exact_multiple")
@pytest.mark.cell(visible=True)
@on_reference_first("exact_multiple")
def test_exact_multiple_of_block_size(observation):
    """8 tokens fill 2 blocks of 4; the 9th takes a third."""
    observed(observation, "seen", "k", "gathered")
    if observation["seen"] != [[8, 2], [9, 3]]:
        raise Fail("[length, blocks held] after 8 tokens and after 9 (block_size 4) are wrong",
                   expected=[[8, 2], [9, 3]], got=observation["seen"],
                   hint="8 tokens fill 2 blocks exactly; the 9th token (position 8) needs block 8 // 4 = 2, a "
                        "new one. Grow when position >= blocks * block_size.")
    close(as_tensor(observation["k"]), torch.cat([keys(8), keys(1, 50)], dim=2), atol=0, rtol=0,
          what="the keys after the 9th token")
    close(as_tensor(observation["gathered"]), torch.cat([keys(8), keys(1, 50)], dim=2), atol=0, rtol=0,
          what="the keys gather(0) returns after the 9th token",
          hint="gather(layer) returns the tokens that layer holds (9 here), not every slot of its blocks (12).")


@pytest.mark.probe("out_of_blocks")
@on_reference_first("out_of_blocks")
def test_out_of_blocks_leaves_the_cache_unchanged(observation):
    """An append the pool has no block for raises OutOfBlocks and changes nothing."""
    observed(observation, "raised", "same", "k", "k2")
    if observation["raised"] != "OutOfBlocks":
        raise Fail("appending a token the pool has no block for should raise OutOfBlocks",
                   expected="OutOfBlocks", got=observation["raised"] or "no exception",
                   hint="Let the allocator's OutOfBlocks propagate, before anything is written.")
    if not observation["same"]:
        raise Fail("the failed append changed the cache (length, block table or the pool's free count)",
                   expected="unchanged", got="changed",
                   hint="Allocate first (all or nothing); write and count the tokens only after it succeeded.")
    close(as_tensor(observation["k"]), keys(4), atol=0, rtol=0, what="the cache after the failed append")
    close(as_tensor(observation["k2"]), torch.cat([keys(4), keys(1, 60)], dim=2), atol=0, rtol=0,
          what="the keys once a block was free again")


@pytest.mark.probe("release")
@on_reference_first("release")
def test_release_returns_every_block(observation):
    """release() frees every block once; a second call does nothing; the empty cache gathers nothing."""
    want = [3, 192, 6, 0, [], 0, [[1, 1, 0, 2], [1, 1, 0, 2]]]
    if observation != want:
        raise Fail("[blocks held for 5 tokens, bytes_allocated() then, free blocks after release() twice, length, "
                   "block_table, bytes_allocated(), the shapes gather(0) returns] are wrong", expected=want,
                   got=observation,
                   hint="5 tokens in blocks of 2 hold 3 blocks of 2 * 2 layers * 1 head * 2 tokens * 2 numbers * 4 "
                        "bytes = 64 bytes each. release() frees every block once, empties the table, and does nothing "
                        "the second time; gather(layer) of the empty cache gives k and v of shape (1, H, 0, D), "
                        "here (1, 1, 0, 2), without error.")


@pytest.mark.probe("reserve")
@on_reference_first("reserve")
def test_reserve_is_all_or_nothing(observation):
    """reserve(n) makes room for n more tokens, all or nothing."""
    want = {"a0": [0, 4], "a": [3, 1], "raised": "OutOfBlocks", "b": [3, 1]}
    if observation != want:
        raise Fail("reserve(0), reserve(9) then reserve(20) on a pool of 4 blocks of 4 went wrong", expected=want,
                   got=observation, hint="reserve(n) makes sure blocks exist for n MORE tokens, all or nothing; "
                                         "reserve(0) takes no block.")

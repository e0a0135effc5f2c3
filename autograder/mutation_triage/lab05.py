"""lab05's mutation triage (see autograder/mutation.py): survivors read by hand.

EQUIVALENT: no correct solution can be told apart from the mutant (the reason).
GAPS: a clause no hidden case exercises yet (what a case would have to do).
Keys are (module, the mutated line as mutmut writes it, stripped), as in mutation.EQUIVALENT.
"""

_REF, _KV = "autograder.reference.lab05", "course.paged_kv"
_MESSAGE = "error-message text (a judge checks the student's message, never the reference's)"
_REPR = "__repr__ text, which no judge reads"
_APPEND_INPUT = ("append's input check: differs only for k/v that are not (1, H, t, D) tensors of the pool's dtype "
                 "and device, which lab05's contract rules out and asks no error for (the decoder passes valid ones)")
_LAYER = ("differs only for a layer outside [0, n_layer) or not an int, which lab05's contract rules out and asks "
          "no error for (the decoder passes 0 .. n_layer - 1)")
_GROW = ("_grow_to computes the blocks still missing itself and takes none when they suffice, so calling it more "
         "often changes nothing")

EQUIVALENT: dict[tuple[str, str], str] = {
    # autograder/reference/lab05.py
    (_REF, "if not isinstance(input_ids, torch.Tensor) and input_ids.dim() != 2 or input_ids.shape[0] != 1 \\"):
        "differs only for input_ids that are not a tensor, which run_request's contract ((1, T0) long) rules out "
        "and asks no error for",
    (_REF, "got = None"): "error-message text (`got` is only shown in the message)",
    (_REF, 'return result(FinishReason.ERROR, f"XXrefused: {input_ids.shape[1]} + {max_tokens} - 1 = {longest} '
           'tokens XX"'): _MESSAGE + " (the refusal's wording)",
    (_REF, "start = clock() if clock is not None else 1.0"): "`start` is read only when there is a deadline",
    (_REF, 'results = [{"tokens": [], "XXfinish_reasonXX": None, "preemptions": 0, "error": None} for _ in range(n)]'):
        "every request's finish_reason is set before serve_all returns (at its refusal or its last token), so the "
        "initial None is never seen",
    (_REF, 'error=f"XXrefused: needs {need} blocks, the pool has {pool.num_blocks}XX")'):
        _MESSAGE + " (the refusal's wording)",
    **{(_REF, line): "solo_tokens' default pool: a toy request's tokens do not depend on the pool it runs alone on "
                     "(the cache gives back what was written), and every served request of the cases fits 64 blocks "
                     "of 4 and 65 blocks of 5 alike"
       for line in ("def solo_tokens(decoder, prompt, max_tokens, eos_token_id=None, pool_blocks=65, block_size=4) "
                    "-> list[int]:",
                    "def solo_tokens(decoder, prompt, max_tokens, eos_token_id=None, pool_blocks=64, block_size=5) "
                    "-> list[int]:")},
    # course/paged_kv.py
    (_KV, '("XXdtype_bytesXX", dtype_bytes)):'): "error-message text (the parameter name check_int shows)",
    (_KV, 'super().__init__(f"XXout of KV blocks: need {needed}, {free} free of {total}.XX")'):
        "OutOfBlocks' message; the judges compare the exception's type only",
    (_KV, 'check_int("block_id", block_id, 0, self.num_blocks + 1)'):
        "refcount of an id past the pool: IndexError instead of ValueError; the contract asks no error for it",
    (_KV, 'return (f"XXBlockAllocator(num_blocks={self.num_blocks}, block_size={self.block_size}, XX"'): _REPR,
    (_KV, "if not isinstance(dtype, torch.dtype) and not dtype.is_floating_point:"):
        "differs only for a dtype that is not a floating torch.dtype: lab05's KVPool is given in the setup cell, "
        "validates nothing, and every pool a judge builds is float32",
    (_KV, 'return (f"XXKVPool(n_layer={self.n_layer}, n_kv_heads={self.n_kv_heads}, head_dim={self.head_dim}, XX"'):
        _REPR,
    (_KV, "self._runs: list[tuple[int, int]] = None"):
        "_runs is read only when the table is not empty, and every table is set through _set_table, which sets it",
    (_KV, "if start + t >= len(self._table) * bs:"): _GROW,
    (_KV, "if start + t > len(self._table) / bs:"): _GROW,
    (_KV, "if missing >= 0:"): "allocate(0) takes nothing and leaves num_used and high_water as they were",
    (_KV, "if not is_int(layer) or not 0 <= layer <= self.pool.n_layer:"): _LAYER,
    (_KV, "if not is_int(layer) and not 0 <= layer < self.pool.n_layer:"): _LAYER,
    (_KV, "if not isinstance(x, torch.Tensor) and x.dim() != 4:"): _APPEND_INPUT,
    (_KV, "got = None"): "error-message text (`got` is only shown in the message)",
    (_KV, "if B != 1 and H != p.n_kv_heads or D != p.head_dim or t < 1:"): _APPEND_INPUT,
    (_KV, "if x.dtype != p.dtype and x.device.type != p.device.type:"): _APPEND_INPUT,
    (_KV, 'return f"XXPagedKVCache(length={self.length}, blocks={self._table})XX"'): _REPR,
}

# KVPool.for_decoder, bytes_total, cache_factory and PagedKVCache.share_prefix, whose mutants no lab05
# judge could see (they serve lab07's engine and the notebook's demos), are out of scope:
# autograder.mutation.SCOPE_EXCLUDE.
GAPS: dict[tuple[str, str], str] = {}

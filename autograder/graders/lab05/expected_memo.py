"""The expected values of lab05's tiny-model cases, kept in _expected.pt (see autograder/memo.py):
the greedy run on StaticKVCache that the paged cache must reproduce, per (prompt, steps)."""
from __future__ import annotations

SOURCES = ["course/decoder.py", "course/kv_cache.py", "course/tiny_model.py",
           "autograder/graders/lab05/_inputs.py", "autograder/graders/lab05/expected_memo.py"]


def static_greedy(prompt_index: int, steps: int) -> dict:
    """The tiny model's greedy tokens and logits rows on StaticKVCache, and its sizes."""
    from autograder.checks import one_thread
    from course.kv_cache import StaticKVCache

    from ._inputs import greedy_rows, shipped
    with one_thread():
        decoder, prompts, _ = shipped()
        c = decoder.config
        prompt = prompts[prompt_index]
        kv = StaticKVCache(c.n_layer, 1, c.n_head, len(prompt) + steps, c.head_dim)
        tokens, rows = greedy_rows(decoder, prompt, kv, steps)
        return {"tokens": tokens, "rows": rows, "prompt_length": len(prompt),
                "sizes": [c.n_layer, c.n_head, c.head_dim]}


PARITY_RUNS = [(0, 16), (1, 12), (2, 20)]        # (prompt_index, steps) of the parity cases
MEMO = {f"static_greedy_{p}_{s}": (lambda p=p, s=s: static_greedy(p, s)) for p, s in PARITY_RUNS}

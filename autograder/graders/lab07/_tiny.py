"""lab07's shipped tiny model, an input built in the student's process (sent to the sandboxed
child with the probes): the batched course decoder, its tokenizer and four lab prompts."""
from __future__ import annotations

from functools import lru_cache

from autograder.checks import shipped_model

@lru_cache(maxsize=1)
def _tiny():
    from course.batched import BatchedDecoder
    from course.decoder import CourseDecoder
    from course.tiny_model import LAB_PROMPTS

    hf, tok = shipped_model()
    dec = CourseDecoder.from_pretrained(hf)
    prompts = {f"t{i}": [int(t) for t in tok.encode(LAB_PROMPTS[j])] for i, j in enumerate((0, 7, 12, 17))}
    return BatchedDecoder(dec), tok, prompts


def tiny_model():
    return _tiny()[0]


def tiny_tokenizer():
    return _tiny()[1]


def tiny_prompts():
    return dict(_tiny()[2])

"""Sampling: logits in, logits out, then one draw. The course's production version. Defined in lab02.

    logits = apply_temperature(logits, 0.7)       # divide by T
    logits = top_k_filter(logits, 50)             # keep the 50 largest (ties at the 50th kept)
    logits = top_p_filter(logits, 0.9)            # keep the smallest nucleus reaching 0.9
    token  = sample_token(logits, generator)      # one draw per row, from the PASSED generator

    sample_next(logits, temperature=0.7, top_k=50, top_p=0.9, generator=g)   # all of the above
    SamplingParams(temperature=0.7, top_p=0.9, seed=0).sampler()            # for course.generation

Later labs use this module instead of a student's Lab 02 answers; Lab 02 proves the
student's functions equal to these on fixtures, and these equal to transformers'
TemperatureLogitsWarper -> TopKLogitsWarper -> TopPLogitsWarper (tests/test_sampling.py).

Shapes: every function takes (B, V) or (V,) logits and works on the last dim, one row
at a time but without a Python loop. Filters return a NEW tensor with -inf at removed
tokens and the input's values (bit for bit) at kept ones, so they compose in any list.

Where the course differs from transformers (same probabilities otherwise):
  * top-p ties: the course sorts descending with a STABLE sort, so among equal
    probabilities the lower token id is kept first. transformers sorts ascending and
    so keeps the higher id when the nucleus boundary falls inside a tie.
  * top_p == 1 turns the filter off: every logit comes back unchanged, even one whose
    probability rounds to 0. transformers turns those into -inf (same probabilities).
  * top_p must be in (0, 1]; transformers also accepts 0 (then keeps
    min_tokens_to_keep tokens) and says "< 1" in its message while accepting 1.
  * float rounding right at the boundary: where the sum reaches top_p only "on paper"
    (decimal probabilities float32 cannot store, e.g. 0.6 + 0.3 at top_p 0.9), the
    course applies its rule to the float32 prefix sums and transformers applies its
    rule (ascending sum <= 1 - top_p) to its own sums; they can differ by one token.
    Powers of two (the top_p_exact_boundary fixture) are exact in both.
  * top-k keeps every token equal to the k-th largest value, exactly like
    transformers (and vLLM), so a tie at the k-th value can keep more than k tokens.
"""
from __future__ import annotations

ANSWERS_FOR = "lab02"  # the grader hides this module while lab02 (or an earlier lab) is graded

import math
import numbers
from dataclasses import asdict, dataclass
from functools import partial

import torch

# ---------------------------------------------------------------- validation


def _is_number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def check_logits(logits, name: str = "logits") -> None:
    """(V,) or (B, V) floating tensor, no NaN, no +inf, at least one finite entry per row.

    -inf is allowed: it is how a filter marks a removed token.
    """
    if not isinstance(logits, torch.Tensor) or logits.dim() not in (1, 2) or not logits.is_floating_point():
        got = (f"shape {tuple(logits.shape)}, dtype {logits.dtype}" if isinstance(logits, torch.Tensor)
               else type(logits).__name__)
        raise ValueError(f"`{name}` must be a floating tensor of shape (V,) or (B, V), got {got}.")
    if logits.shape[-1] == 0:
        raise ValueError(f"`{name}` must have at least one token (V >= 1), got shape {tuple(logits.shape)}.")
    if torch.isnan(logits).any():
        raise ValueError(f"`{name}` must not contain NaN, got NaN at {torch.isnan(logits).nonzero().tolist()[:5]}.")
    if torch.isposinf(logits).any():
        raise ValueError(f"`{name}` must not contain +inf, got +inf at "
                         f"{torch.isposinf(logits).nonzero().tolist()[:5]}.")
    dead = torch.isneginf(logits).all(dim=-1)
    if dead.any():
        rows = dead.reshape(-1).nonzero().flatten().tolist()
        raise ValueError(f"`{name}` must keep at least one finite logit per row, got all -inf in rows {rows[:5]}.")


def check_temperature(temperature) -> float:
    if not _is_number(temperature) or not math.isfinite(temperature) or not temperature > 0:
        raise ValueError(f"`temperature` must be a finite number > 0, got {temperature!r}.")
    return float(temperature)


def check_top_k(top_k) -> int:
    if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral) or top_k < 1:
        raise ValueError(f"`top_k` must be an integer >= 1, got {top_k!r}.")
    return int(top_k)


def check_top_p(top_p) -> float:
    if not _is_number(top_p) or not 0 < top_p <= 1:  # NaN fails both comparisons
        raise ValueError(f"`top_p` must be in (0, 1], got {top_p!r}.")
    return float(top_p)


def check_min_tokens_to_keep(min_tokens_to_keep) -> int:
    if (isinstance(min_tokens_to_keep, bool) or not isinstance(min_tokens_to_keep, numbers.Integral)
            or min_tokens_to_keep < 1):
        raise ValueError(f"`min_tokens_to_keep` must be an integer >= 1, got {min_tokens_to_keep!r}.")
    return int(min_tokens_to_keep)


def check_generator(generator) -> torch.Generator:
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"`generator` must be a torch.Generator (seed it with manual_seed), got {generator!r}.")
    return generator


def _float_at_least_32(x: torch.Tensor) -> torch.dtype:
    # float16 / bfloat16 logits: compute probabilities in float32, as models do.
    return torch.promote_types(x.dtype, torch.float32)


# ---------------------------------------------------------------- one rule per function

def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """logits / T: T < 1 sharpens the distribution, T > 1 flattens it. -inf stays -inf."""
    check_logits(logits)
    return logits / check_temperature(temperature)


def top_k_filter(logits: torch.Tensor, top_k: int) -> torch.Tensor:
    """Keep the `top_k` largest logits of each row; -inf elsewhere.

    Every token equal to the k-th largest value is kept (as transformers does), so a
    tie at the k-th value keeps more than k. top_k >= V keeps everything.
    """
    check_logits(logits)
    k = min(check_top_k(top_k), logits.shape[-1])
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]          # (B, 1): the k-th largest
    return logits.masked_fill(logits < kth, -math.inf)            # (B, V), a new tensor


def top_p_filter(logits: torch.Tensor, top_p: float, min_tokens_to_keep: int = 1) -> torch.Tensor:
    """Nucleus filter: keep the smallest most-probable prefix whose probability reaches `top_p`.

    Sort descending with a stable sort (equal probabilities: lower id first). A token is
    kept when the probability of the tokens before it is still < top_p, so the token
    that crosses (or lands exactly on) top_p is kept and nothing after it. The first
    `min_tokens_to_keep` sorted tokens are always kept. top_p == 1 keeps every logit.
    """
    check_logits(logits)
    p = check_top_p(top_p)
    m = check_min_tokens_to_keep(min_tokens_to_keep)
    if p == 1.0:
        return logits.clone()
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True, stable=True)  # (B, V)
    probs = torch.softmax(sorted_logits.to(_float_at_least_32(logits)), dim=-1)     # (B, V)
    # Probability strictly ahead of each token: the cumsum shifted right by one (exact
    # prefix sums, unlike cumsum - probs, which can round a boundary the wrong way).
    mass_before = torch.cat([torch.zeros_like(probs[..., :1]), torch.cumsum(probs, dim=-1)[..., :-1]], dim=-1)
    remove_sorted = mass_before >= p                    # (B, V) in sorted order
    remove_sorted[..., :m] = False
    remove = remove_sorted.scatter(-1, order, remove_sorted)  # back to vocabulary order
    return logits.masked_fill(remove, -math.inf)


def sample_token(logits: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One draw from softmax(logits) per row, using only `generator` (never the global RNG).

    (B, V) -> (B,) int64; (V,) -> 0-d int64. -inf tokens have probability 0 and are never drawn.
    """
    check_logits(logits)
    check_generator(generator)
    probs = torch.softmax(logits.to(_float_at_least_32(logits)), dim=-1)
    if logits.dim() == 1:
        return torch.multinomial(probs, 1, generator=generator)[0]
    return torch.multinomial(probs, 1, generator=generator)[:, 0]  # (B,)


# ---------------------------------------------------------------- composing

def processors(*, temperature: float = 1.0, top_k: int | None = None, top_p: float = 1.0,
               min_tokens_to_keep: int = 1) -> list:
    """The filters to apply, in the course's (and transformers') order:
    temperature -> top-k -> top-p. Knobs that are off (T = 1, top_k None, top_p 1) are left out."""
    check_temperature(temperature)
    if top_k is not None:
        check_top_k(top_k)
    check_top_p(top_p)
    check_min_tokens_to_keep(min_tokens_to_keep)
    out = []
    if temperature != 1.0:
        out.append(partial(apply_temperature, temperature=temperature))
    if top_k is not None:
        out.append(partial(top_k_filter, top_k=top_k))
    if top_p < 1.0:
        out.append(partial(top_p_filter, top_p=top_p, min_tokens_to_keep=min_tokens_to_keep))
    return out


def filter_logits(logits: torch.Tensor, *, temperature: float = 1.0, top_k: int | None = None,
                  top_p: float = 1.0, min_tokens_to_keep: int = 1) -> torch.Tensor:
    """Temperature, then top-k, then top-p; returns a new tensor."""
    check_logits(logits)
    out = logits.clone()
    for step in processors(temperature=temperature, top_k=top_k, top_p=top_p,
                           min_tokens_to_keep=min_tokens_to_keep):
        out = step(out)
    return out


def sample_next(logits: torch.Tensor, *, temperature: float = 1.0, top_k: int | None = None,
                top_p: float = 1.0, generator: torch.Generator) -> torch.Tensor:
    """filter_logits, then sample_token. temperature == 0 means greedy: the argmax
    (lowest id on ties), no draw, the generator untouched (as in vLLM)."""
    check_logits(logits)
    if _is_number(temperature) and temperature == 0:
        if top_k is not None:
            check_top_k(top_k)
        check_top_p(top_p)
        return torch.argmax(logits, dim=-1)
    return sample_token(filter_logits(logits, temperature=temperature, top_k=top_k, top_p=top_p), generator)


# ---------------------------------------------------------------- parameters of a request

@dataclass(frozen=True)
class SamplingParams:
    """Sampling parameters of one request, validated when they are made (vLLM style).

    temperature: >= 0; 0 means greedy.  top_k: None (off) or >= 1.
    top_p: in (0, 1]; 1 is off.  seed: None or an integer; sampler() needs one
    (or a generator) when temperature > 0, so that every sampled run can be replayed.
    """
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float = 1.0
    min_tokens_to_keep: int = 1
    seed: int | None = None

    def __post_init__(self) -> None:
        t = self.temperature
        if not _is_number(t) or not math.isfinite(t) or t < 0:
            raise ValueError(f"`temperature` must be a finite number >= 0 (0 = greedy), got {t!r}.")
        if self.top_k is not None and (isinstance(self.top_k, bool) or not isinstance(self.top_k, numbers.Integral)
                                       or self.top_k < 1):
            raise ValueError(f"`top_k` must be None (off) or an integer >= 1, got {self.top_k!r}.")
        check_top_p(self.top_p)
        check_min_tokens_to_keep(self.min_tokens_to_keep)
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, numbers.Integral)):
            raise ValueError(f"`seed` must be None or an integer, got {self.seed!r}.")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def to_dict(self) -> dict:
        """Plain values, e.g. for ExperimentRecord.params."""
        return asdict(self)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """The filtered logits these parameters sample from (greedy: unchanged)."""
        if self.greedy:
            check_logits(logits)
            return logits.clone()
        return filter_logits(logits, temperature=self.temperature, top_k=self.top_k, top_p=self.top_p,
                             min_tokens_to_keep=self.min_tokens_to_keep)

    def sampler(self, generator: torch.Generator | None = None):
        """A function logits (V,) -> int, e.g. for course.generation.generate(sampler=...).

        It draws from `generator`, or from a new one seeded with `seed`, made on the
        device of the first logits it sees (a CUDA tensor needs a CUDA generator).
        """
        if self.greedy:
            return lambda logits: int(sample_next(logits, temperature=0, generator=None))
        if generator is None and self.seed is None:
            raise ValueError("`seed` must be set (or a generator passed) to sample with temperature > 0, "
                             "got seed=None.")
        if generator is not None:
            check_generator(generator)
        state = {"generator": generator}

        def sample(logits: torch.Tensor) -> int:
            if state["generator"] is None:
                state["generator"] = torch.Generator(device=logits.device).manual_seed(int(self.seed))
            return int(sample_token(self.apply(logits), state["generator"]))
        return sample

"""sample_token(logits, generator): the hidden cases of the cells sampling_uses_generator and
sampled_frequencies_match_distribution."""
from __future__ import annotations

import pytest
import torch

import course
from autograder.core import Fail, as_tensor, describe, is_raised
from autograder.reference import lab02 as ref

from .judging import _ids, case
from .probes import FREQUENCY_INPUTS, N_DRAWS

GENERATOR = pytest.mark.cell("sampling_uses_generator",
                             description="sample_token draws one token per row with the passed generator")
FREQUENCIES = pytest.mark.cell("sampled_frequencies_match_distribution",
                               description="sample_token's frequencies pass a chi-square goodness-of-fit test "
                                           "(fixed seeds)")
CHI2_MIN_P_VALUE = 1e-6   # a correct sampler fails this for a given seed with probability 1e-6


def _check_tokens(t, *, rows, vocab):
    if t.dtype != torch.int64:
        raise Fail("sample_token should return an int64 (LongTensor)", expected="int64", got=str(t.dtype),
                   hint="torch.multinomial already returns int64; keep it.")
    if tuple(t.shape) != (rows,):
        raise Fail(f"sample_token should return shape ({rows},) for ({rows}, {vocab}) logits",
                   expected=[rows], got=list(t.shape),
                   hint="torch.multinomial(probs, 1) gives (B, 1); take [:, 0] (or squeeze(-1)).")
    if t.numel() and (t.min() < 0 or t.max() >= vocab):
        raise Fail("sample_token returned ids outside the vocabulary", expected=f"ids in [0, {vocab - 1}]",
                   got=[int(t.min()), int(t.max())])


@GENERATOR
@pytest.mark.probe("same_seed")
@pytest.mark.cell(visible=True)
def test_same_seed_same_tokens(observation):
    """Two generators with the same seed give the same tokens."""
    a, b = as_tensor(observation["a"], "the first draw"), as_tensor(observation["b"], "the second draw")
    _check_tokens(a, rows=64, vocab=10)
    if not torch.equal(a, b):
        raise Fail("two generators with the same seed gave different tokens", expected="the same tokens twice",
                   got=f"{int((a != b).sum())} of 64 rows differ",
                   hint="Draw with the generator you were given: torch.multinomial(probs, 1, generator=generator).")


@GENERATOR
@pytest.mark.probe("generator_state")
def test_generator_state_advances(observation):
    """The draw uses the generator it is given."""
    if not observation["advanced"]:
        raise Fail("the generator's state did not change: the draw did not use it", expected="generator used",
                   got="generator untouched",
                   hint="Pass it on: torch.multinomial(probs, 1, generator=generator).")


@GENERATOR
@pytest.mark.probe("global_rng")
def test_global_rng_not_used(observation):
    """The global RNG is neither advanced nor able to change the draw."""
    if not observation["global_unchanged"]:
        raise Fail("sample_token changed the global RNG (torch.manual_seed's stream)", expected="global RNG untouched",
                   got="global RNG advanced",
                   hint="Every random call must take generator=generator; the global RNG is shared with other code.")
    if not torch.equal(as_tensor(observation["a"]), as_tensor(observation["b"])):
        raise Fail("the draw depends on the global seed, not only on the generator",
                   hint="Use only the generator: torch.multinomial(..., generator=generator).")


@GENERATOR
@pytest.mark.probe("rows")
def test_rows_sample_their_own_distribution(observation):
    """One draw per row, from that row's distribution."""
    t = as_tensor(observation, "the result")
    _check_tokens(t, rows=3, vocab=6)
    if t.tolist() != [4, 1, 5]:
        raise Fail("rows were not sampled from their own distributions", expected=[4, 1, 5], got=t.tolist(),
                   hint="Softmax over the last dim (dim=-1) and draw one sample per row.")


@GENERATOR
@pytest.mark.probe("masked_and_extreme")
@pytest.mark.cell(fixture="masked_logits")
def test_removed_tokens_never_drawn(observation):
    """Tokens of probability 0 (-inf, or underflowing next to 1e4) are never drawn."""
    for key, fixture in (("masked", "masked_logits"), ("extreme", "extreme_logits")):
        t = as_tensor(observation[key], f"the draws on {fixture}")
        _check_tokens(t, rows=4000, vocab=8)
        probs = torch.softmax(course.load_fixture(fixture).logits(0), -1)
        bad = sorted(set(t.tolist()) - set(torch.nonzero(probs > 0).flatten().tolist()))
        if bad:
            raise Fail(f"drew tokens of probability 0 on {fixture}", expected="only tokens with probability > 0",
                       got=f"drew ids {bad}",
                       hint="-inf logits must get probability 0; use torch.softmax (stable near 1e4), not exp()/sum.")


@GENERATOR
@pytest.mark.probe("invalid_generator")
def test_invalid_generator_rejected(observation):
    """Anything but a torch.Generator raises ValueError naming `generator`."""
    for g, got in zip((None, 1234, "seed"), observation):
        if not is_raised(got) or not got["is_value_error"]:
            raise Fail(f"sample_token(logits, generator={g!r}) should raise ValueError", expected="ValueError",
                       got=describe(got),
                       hint="Check isinstance(generator, torch.Generator) first; never fall back to the global RNG.")
        if "generator" not in got["message"]:
            raise Fail("the error should name the parameter `generator`", got=got["message"])


FREQ_HINT = "Draw from torch.softmax(logits, dim=-1): multinomial on probabilities of the right row."


@FREQUENCIES
@pytest.mark.parametrize("key", [
    case("long_tail_chi_square", "long_tail", probe=("frequencies", "long_tail"), visible=True, fixture="long_tail"),
    case("masked_tail_chi_square", "masked_tail", probe=("frequencies", "masked_tail"), fixture="long_tail"),
    case("alternating_rows_chi_square", "alternating", probe=("frequencies", "alternating")),
])
def test_frequencies_follow_softmax(observation, key):
    """The frequencies of N_DRAWS draws pass a chi-square test against softmax(logits) (p > 1e-6)."""
    hint = FREQ_HINT
    x = FREQUENCY_INPUTS[key][0]()
    rows = x.expand(N_DRAWS, -1) if x.dim() == 1 else x
    t = as_tensor(observation, "the draws")
    _check_tokens(t, rows=rows.shape[0], vocab=rows.shape[-1])
    groups = [(rows[0], t)] if x.dim() == 1 else [(rows[i], t[i::2]) for i in range(2)]
    for probs_row, draws in ((torch.softmax(r.double(), -1), d) for r, d in groups):
        counts = torch.bincount(draws, minlength=probs_row.numel()).double()
        keep = probs_row > 0
        if counts[~keep].sum() > 0:
            raise Fail("drew tokens whose probability is 0", got=f"ids {_ids(counts * ~keep > 0)}", hint=hint)
        stat, df, p_value = ref.chi_square(counts[keep], probs_row[keep])
        if p_value < CHI2_MIN_P_VALUE:
            raise Fail(f"the sampled frequencies do not match softmax(logits): chi-square = {stat:.1f} "
                       f"with {df} degrees of freedom (p = {p_value:.1e})",
                       expected=[round(float(v), 1) for v in probs_row[keep] * draws.numel()],
                       got=counts[keep].tolist(), hint=hint)

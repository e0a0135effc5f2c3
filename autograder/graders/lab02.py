"""Graders for lab02 (choosing among candidates: top-k, top-p, a seeded draw).

Graded API (the docstrings of the stubs in solutions/lab02 are the contract):
  top_k_filter(logits, top_k) -> logits          keep the k largest; ties at the k-th value kept
  top_p_filter(logits, top_p, min_tokens_to_keep=1) -> logits
                                                 smallest stable-sorted prefix reaching top_p
  sample_token(logits, generator) -> (B,) int64  one draw per row from the passed generator
  filter_logits(logits, *, temperature=1.0, top_k=None, top_p=1.0) -> logits
                                                 temperature -> top-k -> top-p

Filters take (V,) or (B, V) float logits and return a NEW tensor of the same shape and
dtype: the input's values at kept tokens, -inf at removed ones; the input is unchanged.

Probes build inputs (fixtures, seeded random logits) and call the student's function;
judges recompute the same inputs and compare with the reference (course.sampling) or,
in the `*_transformers` cases, with transformers' warpers, computed here in the judge.

Contract coverage (docstring clause -> the hidden cases that fail when it is broken):

  | function / clause                                    | case(s)                                          |
  | top_k_filter: k largest kept, values unchanged       | keeps_k_largest, one_keeps_only_the_max          |
  |   ties at the k-th value all kept; k >= V keeps all  | ties_at_kth_value_all_kept, k_at_least_vocab_..  |
  |   (V = 1 included)                                   |                                                  |
  |   rows independent; equals transformers              | batch_rows_independent, matches_transformers     |
  |   k validated (name and value); new tensor, no change| invalid_k_rejected, input_not_modified_new_tensor|
  | top_p_filter: smallest stable-sorted prefix reaching | exact_boundary_keeps_two, crossing_token_kept,   |
  |   top_p (the crossing token kept, ties lowest id)    | ties_at_boundary_lowest_id_first                 |
  |   per-row cutoff, extreme and masked logits          | batch_rows_get_own_cutoff, extreme_logits, ..    |
  |   min_tokens_to_keep; p = 1 keeps all; transformers  | min_tokens_to_keep, p_equal_one_keeps_all, ..    |
  |   validated; new tensor, no change                   | invalid_parameters_rejected, input_not_modified..|
  | sample_token: the passed generator only, its state   | same_seed_same_tokens, generator_state_advances, |
  |   advances, global RNG unused, one draw per row,     | global_rng_not_used, rows_sample_their_own_..,   |
  |   removed tokens never drawn, generator validated    | removed_tokens_never_drawn, invalid_generator_.. |
  |   frequencies follow softmax (chi-square, p > 1e-6)  | long_tail_/masked_tail_/alternating_rows_chi_..  |
  | filter_logits: temperature -> top-k -> top-p, equal  | long_tail_t07_k5_p09, fixtures_several_settings, |
  |   to transformers' warpers; order; knobs off         | random_logits_batches, top_k_before_top_p,       |
  |                                                      | temperature_before_filters, knobs_off_keep_..    |
  |   validated; input unchanged                         | invalid_parameters_rejected, input_not_modified  |
"""
from __future__ import annotations

import math

import torch

import course

from ..checks import Input, call_probe, reference_rejects, rejects, result_of, unchanged
from ..core import Case, Fail, Test, as_tensor, describe, function, is_raised, raised
from ..reference import lab02 as ref

LAB = "lab02"

API = {
    "top_k_filter": "(logits, top_k)",
    "top_p_filter": "(logits, top_p, min_tokens_to_keep=1)",
    "sample_token": "(logits, generator)",
    "filter_logits": "(logits, *, temperature=1.0, top_k=None, top_p=1.0)",
}
CHI2_MIN_P_VALUE = 1e-6   # a correct sampler fails this for a given seed with probability 1e-6


# ---------------------------------------------------------------- inputs (shared by probes and judges)

def named(label, make):
    """An input maker with a label for messages, e.g. "fixture 'flat'"."""
    make.label = label
    return make


def fx(name, step=0):
    return named(f"fixture {name!r}", lambda: course.load_fixture(name).logits(step))


def fx_all(name):
    return named(f"fixture {name!r} (all steps)", lambda: course.load_fixture(name).logits())


def stack(*makers):
    return named("a batch of " + " + ".join(m.label for m in makers),
                 lambda: torch.stack([m() for m in makers]))


def rand(seed, rows=16, vocab=40, scale=3.0):
    def make():
        g = torch.Generator().manual_seed(seed)
        return torch.randn(rows, vocab, generator=g) * scale
    return named(f"random ({rows}, {vocab}) logits, seed {seed}", make)


def probs_log(*p):
    return named(f"log of probabilities {list(p)}", lambda: torch.log(torch.tensor(p, dtype=torch.float32)))


def const(values):
    return named(f"logits {values}", lambda: torch.tensor(values, dtype=torch.float32))


def mapped(make, f, label):
    return named(label, lambda: f(make()))


def _long_tail_masked():
    """long_tail with all but its 5 most likely tokens already removed (-inf)."""
    x = course.load_fixture("long_tail").logits(0)
    rank = torch.argsort(torch.argsort(x, descending=True, stable=True))
    return x.masked_fill(rank >= 5, -math.inf)


long_tail_masked = named("fixture 'long_tail' with all but 5 tokens at -inf", _long_tail_masked)


# ---------------------------------------------------------------- probing


def _calls_probe(name, calls):
    """checks.call_probe over (make_input, kwargs) pairs: each call's result, whether the
    input changed, and whether the input object itself came back."""
    return call_probe(name, [Input(getattr(make, "label", "logits"), make, kwargs) for make, kwargs in calls])


def _label(make, kwargs):
    args = ", ".join([f"<{getattr(make, 'label', 'logits')}>"] + [f"{k}={v!r}" for k, v in kwargs.items()])
    return f"({args})"


def _ref(name):
    """The reference function `name`, looked up when the judge runs (not when the grader is imported)."""
    return lambda *args, **kwargs: getattr(ref, name)(*args, **kwargs)


def _ids(mask_row):
    return torch.nonzero(mask_row).flatten().tolist()


def check_filtered(obs, x, expected, *, call, hint, compare="values"):
    """One filter result against the expected logits.

    compare="values": kept tokens must hold the input's values (top-k, top-p);
    compare="probs":  softmax of the result must equal softmax of expected (the pipeline).
    """
    got = as_tensor(result_of(obs, call, hint, expected="filtered logits"), "the result")
    if tuple(got.shape) != tuple(x.shape):
        raise Fail(f"{call} returned shape {tuple(got.shape)} for input shape {tuple(x.shape)}",
                   expected=list(x.shape), got=list(got.shape),
                   hint="Work on the last dimension and keep the input's shape: (V,) -> (V,), (B, V) -> (B, V).")
    if got.dtype != x.dtype:
        raise Fail(f"{call} returned dtype {got.dtype}, the input was {x.dtype}", expected=str(x.dtype),
                   got=str(got.dtype), hint="Keep the input's dtype (masked_fill on the input does).")
    if torch.isnan(got).any():
        raise Fail(f"{call} returned NaN", got=describe(obs["result"]),
                   hint="Removed tokens must be -inf, never NaN; compute probabilities with torch.softmax.")
    got_keep, exp_keep = torch.isfinite(got), torch.isfinite(expected)
    if not torch.equal(got_keep, exp_keep):
        g2, e2 = got_keep.reshape(-1, got.shape[-1]), exp_keep.reshape(-1, got.shape[-1])
        row = int(torch.nonzero((g2 != e2).any(-1))[0])
        where = f" in row {row}" if got.dim() == 2 else ""
        if int(g2[row].sum()) == int(e2[row].sum()) and call.startswith("top_p_filter"):
            # the right NUMBER of tokens, but not the right ones: the cutoff is right, the mapping
            # from sorted order back to token ids is not (e.g. gather where scatter was needed)
            hint = (f"You kept the right number of tokens ({int(e2[row].sum())}) but not the right ones: a mask "
                    "computed in sorted order must be put back in vocabulary order (mask.scatter(-1, "
                    "sorted_idx, sorted_mask), or index with the inverse permutation), not gathered.")
        raise Fail(f"{call} kept the wrong tokens{where}", expected=f"kept ids {_ids(e2[row])}",
                   got=f"kept ids {_ids(g2[row])}", hint=hint)
    if (got[~got_keep] != -math.inf).any():
        raise Fail(f"{call} marked removed tokens with something other than -inf",
                   expected="-inf", got=sorted(set(got[~got_keep].tolist()))[:3],
                   hint="Use masked_fill(mask, float('-inf')) so the result composes with the next filter.")
    if compare == "values":
        if not torch.allclose(got[got_keep].double(), x[got_keep].double(), atol=1e-6, rtol=0):
            raise Fail(f"{call} changed the logits of kept tokens", expected="the input's values at kept tokens",
                       got="different values",
                       hint="A filter only removes tokens: return the input's logits at kept tokens, "
                            "not probabilities or log-probabilities.")
    else:
        pg, pe = torch.softmax(got.double(), -1), torch.softmax(expected.double(), -1)
        if not torch.allclose(pg, pe, atol=1e-5, rtol=1e-4):
            diff = float((pg - pe).abs().max())
            raise Fail(f"{call} keeps the right tokens but with the wrong probabilities (max difference {diff:.2g})",
                       expected="softmax equal to transformers' within 1e-5", got=f"max difference {diff:.2g}",
                       hint=hint)
    if not obs["unchanged"]:
        raise Fail(f"{call} changed the logits tensor it was given",
                   hint="Never modify the input in place: use masked_fill (not masked_fill_), logits / T "
                        "(not logits /= T), and no logits[...] = ... assignments.")
    unchanged(obs, call)


def filter_case(name, fn_name, calls, expected_fn, *, hint, visible=False, fixture=None, compare="values"):
    def judge(obs):
        if not isinstance(obs, list) or len(obs) != len(calls):
            raise Fail("the probe returned an unexpected observation", got=describe(obs))
        for (make, kwargs), o in zip(calls, obs):
            x = make()
            check_filtered(o, x, expected_fn(x, **kwargs), call=f"{fn_name}{_label(make, kwargs)}",
                           hint=hint, compare=compare)
    return Case(name, 1, _calls_probe(fn_name, calls), judge, visible=visible, fixture=fixture, hint=hint)


def invalid_case(name, fn_name, make, bad, *, hint, extra=None):
    """bad: list of (parameter name, kwargs) that must raise ValueError naming the parameter and value."""
    calls = [(make, dict(kwargs, **(extra or {}))) for _, kwargs in bad]

    def judge(obs):
        for (param, kwargs), o in zip(bad, obs):
            call = f"{fn_name}(logits, {param}={kwargs[param]!r})"
            reference_rejects(getattr(ref, fn_name), (make(),), dict(kwargs, **(extra or {})), call)
            rejects(o, call, param, kwargs[param], hint)
    return Case(name, 1, _calls_probe(fn_name, calls), judge, hint=hint)


# ---------------------------------------------------------------- top_k_filter

TOPK_HINT = ("Find the k-th largest value per row (torch.topk(logits, k).values[..., -1:]) and remove "
             "every token strictly below it.")

TOP_K = Test(LAB, "top_k_keeps_k_largest", "top_k_filter keeps the k largest logits of every row", (
    filter_case("keeps_k_largest", "top_k_filter", [(fx("long_tail"), dict(top_k=5)), (fx("flat"), dict(top_k=3))],
                _ref("top_k_filter"), hint=TOPK_HINT, visible=True, fixture="long_tail"),
    filter_case("one_keeps_only_the_max", "top_k_filter", [(fx("peaked"), dict(top_k=1)),
                                                           (fx("extreme_logits"), dict(top_k=2))],
                _ref("top_k_filter"), hint="top_k=1 keeps only the largest logit; compare logits, no exp() needed.",
                fixture="peaked"),
    filter_case("ties_at_kth_value_all_kept", "top_k_filter",
                [(fx("ties"), dict(top_k=1)), (fx("uniform_row"), dict(top_k=2))], _ref("top_k_filter"),
                hint="The contract keeps every token EQUAL to the k-th largest value (as transformers does): "
                     "compare with `<` against the k-th value, do not take exactly k indices.", fixture="ties"),
    filter_case("k_at_least_vocab_keeps_all", "top_k_filter",
                [(fx("flat"), dict(top_k=8)), (fx("flat"), dict(top_k=50)), (fx("masked_logits"), dict(top_k=7)),
                 (const([[2.5], [-1.0]]), dict(top_k=3))],   # V = 1: the one token is always kept
                _ref("top_k_filter"), hint="When top_k >= V, keep every token (clamp k to V before torch.topk).",
                fixture="flat"),
    filter_case("batch_rows_independent", "top_k_filter",
                [(stack(fx("peaked"), fx("flat"), fx("ties")), dict(top_k=2))], _ref("top_k_filter"),
                hint="Each row needs its own k-th value: keep the last dim (values[..., -1:]) so it broadcasts per row."),
    filter_case("matches_transformers", "top_k_filter",
                [(rand(11), dict(top_k=1)), (rand(12), dict(top_k=7)), (rand(13, vocab=64), dict(top_k=63))],
                lambda x, top_k: ref.transformers_pipeline(x, top_k=top_k), hint=TOPK_HINT),
    invalid_case("invalid_k_rejected", "top_k_filter", fx("flat"),
                 [("top_k", dict(top_k=0)), ("top_k", dict(top_k=-2)), ("top_k", dict(top_k=2.5)),
                  ("top_k", dict(top_k=None)), ("top_k", dict(top_k="3"))],
                 hint="Check `top_k` first: an int (not bool) >= 1, else raise "
                      "ValueError(f\"`top_k` must be an integer >= 1, got {top_k!r}.\")."),
    filter_case("input_not_modified_new_tensor", "top_k_filter",
                [(fx("long_tail"), dict(top_k=3)), (rand(14), dict(top_k=100))], _ref("top_k_filter"),
                hint=TOPK_HINT),
))


# ---------------------------------------------------------------- top_p_filter

TOPP_HINT = ("Sort descending (stable), softmax, cumsum; a token is kept while the probability BEFORE it "
             "is still < top_p (the crossing token is kept); scatter the mask back to vocabulary order.")

TOP_P = Test(LAB, "top_p_keeps_crossing_token", "top_p_filter keeps the smallest nucleus reaching top_p", (
    filter_case("exact_boundary_keeps_two", "top_p_filter", [(fx("top_p_exact_boundary"), dict(top_p=0.75))],
                _ref("top_p_filter"), visible=True, fixture="top_p_exact_boundary",
                hint="1/2 + 1/4 reaches 0.75 exactly: keep those two and nothing after. Remove a token when the "
                     "probability before it is >= top_p (not >)."),
    filter_case("crossing_token_kept", "top_p_filter",
                [(fx("long_tail"), dict(top_p=0.9)), (fx("flat"), dict(top_p=0.5)),
                 (probs_log(0.5, 0.3, 0.15, 0.05), dict(top_p=0.6))],
                _ref("top_p_filter"), visible=True, fixture="long_tail",
                hint="The token whose probability makes the running sum cross top_p belongs to the nucleus: "
                     "compare the sum of the tokens BEFORE each token with top_p."),
    filter_case("ties_at_boundary_lowest_id_first", "top_p_filter",
                [(fx("ties"), dict(top_p=0.05)), (fx("uniform_row"), dict(top_p=0.5)),
                 (const([[0.0] * 6]), dict(top_p=0.2))], _ref("top_p_filter"), fixture="ties",
                hint="Among equal probabilities the lower token id comes first: sort with "
                     "torch.sort(..., descending=True, stable=True)."),
    filter_case("batch_rows_get_own_cutoff", "top_p_filter",
                [(stack(fx("peaked"), fx("flat"), fx("ties")), dict(top_p=0.8)),
                 (rand(21, rows=6, vocab=12, scale=2.0), dict(top_p=0.7))], _ref("top_p_filter"),
                hint="Every row has its own cut-off: compute the cumulative sums on the whole (B, V) tensor "
                     "along dim=-1 (no loop, no cut-off shared between rows)."),
    filter_case("extreme_logits", "top_p_filter",
                [(fx("extreme_logits"), dict(top_p=0.9)), (mapped(fx("flat"), lambda x: x + 100, "fixture 'flat' + 100"), dict(top_p=0.7)),
                 (mapped(fx("flat"), lambda x: 1000 * x, "1000 * fixture 'flat'"), dict(top_p=0.7))], _ref("top_p_filter"),
                fixture="extreme_logits",
                hint="exp() of a logit near 1e4 overflows: use torch.softmax, which subtracts the maximum."),
    filter_case("masked_tokens_stay_removed", "top_p_filter",
                [(fx("masked_logits"), dict(top_p=0.95)), (long_tail_masked, dict(top_p=0.99)),
                 (long_tail_masked, dict(top_p=1.0))], _ref("top_p_filter"), fixture="masked_logits",
                hint="-inf logits have probability 0: they sort last and must stay -inf."),
    filter_case("min_tokens_to_keep", "top_p_filter",
                [(fx("peaked"), dict(top_p=0.5, min_tokens_to_keep=3)),
                 (fx("top_p_exact_boundary"), dict(top_p=0.75, min_tokens_to_keep=4)),
                 (fx("flat"), dict(top_p=0.3, min_tokens_to_keep=20))], _ref("top_p_filter"), fixture="peaked",
                hint="After computing the mask in sorted order, never remove the first min_tokens_to_keep "
                     "sorted positions (mask[..., :min_tokens_to_keep] = False); more than V keeps all."),
    filter_case("p_equal_one_keeps_all", "top_p_filter",
                [(fx("long_tail"), dict(top_p=1.0)), (const([[0.0, 0.0, -200.0, 1.0, -math.inf]]), dict(top_p=1)),
                 (fx("masked_logits"), dict(top_p=1.0))], _ref("top_p_filter"),
                hint="top_p == 1 turns the filter off: return a copy of every logit, even one whose probability "
                     "rounds to 0 (float rounding can make the running sum reach 1 early)."),
    filter_case("matches_transformers", "top_p_filter",
                [(rand(31), dict(top_p=0.9)), (rand(32), dict(top_p=0.5)), (rand(33, vocab=64), dict(top_p=0.95)),
                 (rand(34, scale=1.0), dict(top_p=0.3))],
                lambda x, top_p: ref.transformers_pipeline(x, top_p=top_p), hint=TOPP_HINT),
    invalid_case("invalid_parameters_rejected", "top_p_filter", fx("flat"),
                 [("top_p", dict(top_p=0)), ("top_p", dict(top_p=-0.5)), ("top_p", dict(top_p=1.5)),
                  ("top_p", dict(top_p=math.nan)), ("top_p", dict(top_p="0.9")), ("top_p", dict(top_p=None)),
                  ("min_tokens_to_keep", dict(top_p=0.9, min_tokens_to_keep=0)),
                  ("min_tokens_to_keep", dict(top_p=0.9, min_tokens_to_keep=-1)),
                  ("min_tokens_to_keep", dict(top_p=0.9, min_tokens_to_keep=1.5))],
                 hint="Validate before computing: `top_p` a number (not bool) with 0 < top_p <= 1 (NaN fails "
                      "both comparisons), `min_tokens_to_keep` an int >= 1; raise ValueError(f\"`top_p` must "
                      "be in (0, 1], got {top_p!r}.\")."),
    filter_case("input_not_modified_new_tensor", "top_p_filter",
                [(fx("long_tail"), dict(top_p=0.9)), (fx("flat", 0), dict(top_p=0.5)), (rand(35), dict(top_p=0.8))],
                _ref("top_p_filter"), hint=TOPP_HINT),
))


# ---------------------------------------------------------------- sample_token

def _sampling_input():
    return rand(41, rows=64, vocab=10, scale=1.0)()


def _probe_same_seed(ns):
    fn = function(ns, "sample_token")
    x = _sampling_input()
    a = fn(x, torch.Generator().manual_seed(2024))
    b = fn(x, torch.Generator().manual_seed(2024))
    return {"a": a, "b": b}


def _judge_same_seed(obs):
    a, b = as_tensor(obs["a"], "the first draw"), as_tensor(obs["b"], "the second draw")
    _check_tokens(a, rows=64, vocab=10)
    if not torch.equal(a, b):
        raise Fail("two generators with the same seed gave different tokens", expected="the same tokens twice",
                   got=f"{int((a != b).sum())} of 64 rows differ",
                   hint="Draw with the generator you were given: torch.multinomial(probs, 1, generator=generator).")


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


def _probe_generator_state(ns):
    fn = function(ns, "sample_token")
    g = torch.Generator().manual_seed(7)
    before = g.get_state()
    fn(_sampling_input(), g)
    return {"advanced": not torch.equal(before, g.get_state())}


def _judge_generator_state(obs):
    if not obs["advanced"]:
        raise Fail("the generator's state did not change: the draw did not use it", expected="generator used",
                   got="generator untouched",
                   hint="Pass it on: torch.multinomial(probs, 1, generator=generator).")


def _probe_global_rng(ns):
    fn = function(ns, "sample_token")
    saved = torch.get_rng_state()
    try:
        x = _sampling_input()
        torch.manual_seed(1)
        global_before = torch.get_rng_state()
        a = fn(x, torch.Generator().manual_seed(99))
        global_unchanged = bool(torch.equal(global_before, torch.get_rng_state()))
        torch.manual_seed(12345)  # a different global state must not change the draw
        b = fn(x, torch.Generator().manual_seed(99))
    finally:
        torch.set_rng_state(saved)
    return {"global_unchanged": global_unchanged, "a": a, "b": b}


def _judge_global_rng(obs):
    if not obs["global_unchanged"]:
        raise Fail("sample_token changed the global RNG (torch.manual_seed's stream)", expected="global RNG untouched",
                   got="global RNG advanced",
                   hint="Every random call must take generator=generator; the global RNG is shared with other code.")
    if not torch.equal(as_tensor(obs["a"]), as_tensor(obs["b"])):
        raise Fail("the draw depends on the global seed, not only on the generator",
                   hint="Use only the generator: torch.multinomial(..., generator=generator).")


def _probe_rows(ns):
    fn = function(ns, "sample_token")
    x = torch.full((3, 6), -math.inf)
    x[0, 4] = x[1, 1] = x[2, 5] = 0.0   # each row allows exactly one token
    return fn(x, torch.Generator().manual_seed(0))


def _judge_rows(obs):
    t = as_tensor(obs, "the result")
    _check_tokens(t, rows=3, vocab=6)
    if t.tolist() != [4, 1, 5]:
        raise Fail("rows were not sampled from their own distributions", expected=[4, 1, 5], got=t.tolist(),
                   hint="Softmax over the last dim (dim=-1) and draw one sample per row.")


def _probe_masked_and_extreme(ns):
    fn = function(ns, "sample_token")
    g = torch.Generator().manual_seed(5)
    masked = fn(course.load_fixture("masked_logits").logits(0).expand(4000, -1).clone(), g)
    extreme = fn(course.load_fixture("extreme_logits").logits(0).expand(4000, -1).clone(), g)
    return {"masked": masked, "extreme": extreme}


def _judge_masked_and_extreme(obs):
    for key, fixture in (("masked", "masked_logits"), ("extreme", "extreme_logits")):
        t = as_tensor(obs[key], f"the draws on {fixture}")
        _check_tokens(t, rows=4000, vocab=8)
        probs = torch.softmax(course.load_fixture(fixture).logits(0), -1)
        bad = sorted(set(t.tolist()) - set(torch.nonzero(probs > 0).flatten().tolist()))
        if bad:
            raise Fail(f"drew tokens of probability 0 on {fixture}", expected="only tokens with probability > 0",
                       got=f"drew ids {bad}",
                       hint="-inf logits must get probability 0; use torch.softmax (stable near 1e4), not exp()/sum.")


def _probe_invalid_generator(ns):
    fn = function(ns, "sample_token")
    out = []
    for g in (None, 1234, "seed"):
        try:
            fn(torch.zeros(2, 4), g)
            out.append("returned")
        except Exception as e:
            out.append(raised(e))
    return out


def _judge_invalid_generator(obs):
    for g, got in zip((None, 1234, "seed"), obs):
        if not is_raised(got) or not got["is_value_error"]:
            raise Fail(f"sample_token(logits, generator={g!r}) should raise ValueError", expected="ValueError",
                       got=describe(got),
                       hint="Check isinstance(generator, torch.Generator) first; never fall back to the global RNG.")
        if "generator" not in got["message"]:
            raise Fail("the error should name the parameter `generator`", got=got["message"])


SAMPLING = Test(LAB, "sampling_uses_generator", "sample_token draws one token per row with the passed generator", (
    Case("same_seed_same_tokens", 1, _probe_same_seed, _judge_same_seed, visible=True),
    Case("generator_state_advances", 1, _probe_generator_state, _judge_generator_state),
    Case("global_rng_not_used", 1, _probe_global_rng, _judge_global_rng),
    Case("rows_sample_their_own_distribution", 1, _probe_rows, _judge_rows),
    Case("removed_tokens_never_drawn", 1, _probe_masked_and_extreme, _judge_masked_and_extreme,
         fixture="masked_logits"),
    Case("invalid_generator_rejected", 1, _probe_invalid_generator, _judge_invalid_generator),
))


# ---------------------------------------------------------------- sampled frequencies (chi-square)

N_DRAWS = 40_000


def _freq_probe(make, seed):
    def probe(ns):
        fn = function(ns, "sample_token")
        x = make()
        return fn(x.expand(N_DRAWS, -1).clone() if x.dim() == 1 else x, torch.Generator().manual_seed(seed))
    return probe


def _freq_judge(make, hint):
    def judge(obs):
        x = make()
        rows = x.expand(N_DRAWS, -1) if x.dim() == 1 else x
        t = as_tensor(obs, "the draws")
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
    return judge


def _alternating():
    """Even rows: long_tail with only its top 5 tokens; odd rows: flat. (N_DRAWS, V=8)"""
    flat = course.load_fixture("flat").logits(0)
    peaky = torch.tensor([3.0, 1.0, 0.0, -1.0, -math.inf, 2.0, 0.5, -math.inf])
    return torch.stack([peaky, flat]).repeat(N_DRAWS // 2, 1)


FREQ_HINT = "Draw from torch.softmax(logits, dim=-1): multinomial on probabilities of the right row."

FREQUENCIES = Test(LAB, "sampled_frequencies_match_distribution",
                   "sample_token's frequencies pass a chi-square goodness-of-fit test (fixed seeds)", (
    Case("long_tail_chi_square", 1, _freq_probe(fx("long_tail"), 3), _freq_judge(fx("long_tail"), FREQ_HINT),
         visible=True, fixture="long_tail"),
    Case("masked_tail_chi_square", 1, _freq_probe(long_tail_masked, 4), _freq_judge(long_tail_masked, FREQ_HINT),
         fixture="long_tail"),
    Case("alternating_rows_chi_square", 1, _freq_probe(_alternating, 5), _freq_judge(_alternating, FREQ_HINT)),
))


# ---------------------------------------------------------------- the pipeline

PIPE_HINT = ("Apply temperature first (logits / T), then top_k_filter, then top_p_filter on the result; skip "
             "top-k when top_k is None and top-p when top_p == 1.")
CONFIGS = [dict(temperature=0.7, top_k=5, top_p=0.9), dict(temperature=1.5, top_k=None, top_p=0.8),
           dict(temperature=2.0, top_k=3, top_p=1.0), dict(temperature=0.5, top_k=None, top_p=0.6),
           dict(temperature=1.0, top_k=10, top_p=0.95)]


def pipeline_case(name, calls, *, hint=PIPE_HINT, visible=False, fixture=None):
    return filter_case(name, "filter_logits", calls, lambda x, **kw: ref.transformers_pipeline(x, **kw),
                       hint=hint, visible=visible, fixture=fixture, compare="probs")


PIPELINE = Test(LAB, "pipeline_matches_transformers",
                "filter_logits equals transformers' Temperature -> TopK -> TopP warpers", (
    pipeline_case("long_tail_t07_k5_p09", [(fx("long_tail"), dict(temperature=0.7, top_k=5, top_p=0.9))],
                  visible=True, fixture="long_tail"),
    pipeline_case("fixtures_several_settings",
                  [(fx_all(n), cfg) for n in ("peaked", "flat", "extreme_logits", "masked_logits",
                                              "json_bracket_risk") for cfg in CONFIGS[:3]]),
    pipeline_case("random_logits_batches", [(rand(50 + i, rows=8, vocab=64), cfg) for i, cfg in enumerate(CONFIGS)]),
    pipeline_case("top_k_before_top_p", [(probs_log(0.4, 0.3, 0.2, 0.1), dict(top_k=2, top_p=0.5))],
                  hint="Order matters: top-k first, then top-p renormalises over the k survivors "
                       "(0.4/0.7 = 0.57 already reaches 0.5, so one token is left)."),
    pipeline_case("temperature_before_filters", [(fx("long_tail"), dict(temperature=2.0, top_p=0.9)),
                                                 (fx("long_tail"), dict(temperature=0.5, top_k=3, top_p=0.8))],
                  hint="Temperature changes which tokens reach top_p: divide the logits by T BEFORE filtering.",
                  fixture="long_tail"),
    pipeline_case("knobs_off_keep_distribution", [(fx("long_tail"), dict()), (rand(60), dict(top_p=1.0))],
                  hint="With temperature=1, top_k=None, top_p=1 nothing is removed: softmax of the result must "
                       "equal softmax of the input."),
    invalid_case("invalid_parameters_rejected", "filter_logits", fx("flat"),
                 [("temperature", dict(temperature=0.0)), ("temperature", dict(temperature=-1.0)),
                  ("temperature", dict(temperature=math.nan)), ("temperature", dict(temperature=math.inf)),
                  ("temperature", dict(temperature="1.0")), ("top_k", dict(top_k=0)),
                  ("top_k", dict(top_k=2.5)), ("top_p", dict(top_p=0.0)), ("top_p", dict(top_p=1.5))],
                 hint="Validate all three up front: `temperature` a finite number > 0, `top_k` None or an int "
                      ">= 1, `top_p` in (0, 1]; each error names the parameter and shows the value."),
    pipeline_case("input_not_modified", [(fx("long_tail"), dict(temperature=0.5, top_p=0.9)),
                                         (rand(61), dict(temperature=2.0, top_k=4))]),
))


TESTS = [TOP_K, TOP_P, SAMPLING, FREQUENCIES, PIPELINE]

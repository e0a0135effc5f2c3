"""course.sampling: the course's temperature / top-k / top-p / sampling, checked against
transformers' warpers, plus the deliberate differences the module docstring states."""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

import course
from course import sampling as S
from course.generation import generate

from autograder.reference.lab02 import chi_square  # the judges' statistic, tested here too


def hf_pipeline(logits, temperature=1.0, top_k=None, top_p=1.0):
    """transformers' order: temperature -> top-k -> top-p, as generate() builds it."""
    procs = LogitsProcessorList()
    if temperature != 1.0:
        procs.append(TemperatureLogitsWarper(float(temperature)))
    if top_k is not None:
        procs.append(TopKLogitsWarper(top_k))
    if top_p < 1.0:
        procs.append(TopPLogitsWarper(top_p))
    x = logits if logits.dim() == 2 else logits[None]
    out = procs(None, x.clone())
    return out if logits.dim() == 2 else out[0]


def assert_same_distribution(ours, theirs):
    assert torch.equal(torch.isfinite(ours), torch.isfinite(theirs)), "kept sets differ"
    torch.testing.assert_close(torch.softmax(ours, -1), torch.softmax(theirs, -1), atol=1e-6, rtol=1e-5)


def kept(x):
    return torch.isfinite(x).nonzero().flatten().tolist()


def random_logits(seed, rows=32, vocab=50, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, vocab, generator=g) * scale


# ---------------------------------------------------------------- top-p

def test_exact_boundary_keeps_the_two_tokens_that_reach_p():
    fx = course.load_fixture("top_p_exact_boundary")
    out = S.top_p_filter(fx.logits(0), fx.params["top_p"])
    assert kept(out) == [fx.token_id(" yes"), fx.token_id(" no")]


def test_the_token_that_crosses_p_is_kept():
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    assert kept(S.top_p_filter(logits, 0.6)) == [0, 1]   # 0.5 < 0.6, 0.5 + 0.3 crosses
    assert kept(S.top_p_filter(logits, 0.5)) == [0]      # lands exactly on p: nothing after
    assert kept(S.top_p_filter(logits, 0.81)) == [0, 1, 2]


def test_kept_values_are_the_input_values_bit_for_bit():
    x = random_logits(0)
    out = S.top_p_filter(x, 0.8)
    mask = torch.isfinite(out)
    assert torch.equal(out[mask], x[mask]) and (out[~mask] == -math.inf).all()


def test_ties_at_the_boundary_keep_the_lower_ids_unlike_transformers():
    uniform = torch.zeros(1, 8)
    ours = S.top_p_filter(uniform, 0.5)
    theirs = TopPLogitsWarper(0.5)(None, uniform.clone())
    assert kept(ours[0]) == [0, 1, 2, 3]
    assert kept(theirs[0]) == [4, 5, 6, 7]  # transformers' ascending sort: the documented difference
    ties = course.load_fixture("ties").logits(0)  # ids 3 and 6 share the maximum
    assert kept(S.top_p_filter(ties, 0.05)) == [3]


def test_p_equal_one_keeps_every_logit_even_zero_probability_ones():
    x = torch.tensor([[0.0, 0.0, -200.0, 1.0, -math.inf]])  # exp(-200) underflows to 0 in float32
    out = S.top_p_filter(x, 1.0)
    assert torch.equal(out, x) and out is not x
    theirs = TopPLogitsWarper(1.0)(None, x.clone())
    assert theirs[0, 2] == -math.inf  # transformers drops the zero-probability token ...
    torch.testing.assert_close(torch.softmax(out, -1), torch.softmax(theirs, -1))  # ... same probabilities


def test_rounding_at_a_decimal_boundary_can_differ_from_transformers_by_one_token():
    # The documented difference: float32 stores 0.6 as 0.59999996, below top_p = 0.6, so the
    # course's rule (mass before < p) keeps a second token; transformers' ascending sum of
    # the other three is 0.39999998 <= 1 - 0.6, so it keeps one.
    x = torch.log(torch.tensor([[0.6, 0.3, 0.05, 0.05]]))
    assert torch.softmax(x, -1)[0, 0].item() < 0.6
    assert kept(S.top_p_filter(x, 0.6)[0]) == [0, 1]
    assert kept(TopPLogitsWarper(0.6)(None, x.clone())[0]) == [0]
    # with top_p clearly below the stored 0.59999996, the two agree again
    assert kept(S.top_p_filter(x, 0.599)[0]) == kept(TopPLogitsWarper(0.599)(None, x.clone())[0]) == [0]


def test_rows_of_a_batch_get_their_own_cutoff():
    rows = torch.stack([course.load_fixture("peaked").logits(0), course.load_fixture("flat").logits(0)])
    out = S.top_p_filter(rows, 0.8)
    assert torch.isfinite(out).sum(-1).tolist() == [1, 7]  # cumsum of flat: ... 0.764, 0.884
    for i in range(2):
        assert torch.equal(out[i], S.top_p_filter(rows[i], 0.8))  # (V,) and (B, V) agree


def test_min_tokens_to_keep():
    peaked = course.load_fixture("peaked").logits(0)
    assert torch.isfinite(S.top_p_filter(peaked, 0.5)).sum() == 1
    out = S.top_p_filter(peaked, 0.5, min_tokens_to_keep=3)
    assert kept(out) == sorted(torch.argsort(peaked, descending=True, stable=True)[:3].tolist())
    assert torch.equal(S.top_p_filter(peaked, 0.5, min_tokens_to_keep=100), peaked)


def test_extreme_and_masked_logits():
    extreme = course.load_fixture("extreme_logits").logits(0)
    assert_same_distribution(S.top_p_filter(extreme, 0.9), hf_pipeline(extreme, top_p=0.9))
    for f in (lambda x: x + 100, lambda x: 1000 * x):
        flat = course.load_fixture("flat").logits(0)
        assert_same_distribution(S.top_p_filter(f(flat), 0.7), hf_pipeline(f(flat), top_p=0.7))
    masked = course.load_fixture("masked_logits").logits(0)
    out = S.top_p_filter(masked, 0.99)
    assert out[1] == -math.inf and out[7] == -math.inf


@pytest.mark.parametrize("p", [0.1, 0.35, 0.5, 0.8, 0.9, 0.95, 0.999])
def test_top_p_matches_transformers_on_random_logits(p):
    for seed in range(5):
        x = random_logits(seed)
        assert_same_distribution(S.top_p_filter(x, p), TopPLogitsWarper(p)(None, x.clone()))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-20, 20), min_size=1, max_size=12), st.floats(0.01, 0.99))
def test_nucleus_is_the_smallest_prefix_reaching_p(values, p):
    x = torch.tensor(values, dtype=torch.float32)
    out = S.top_p_filter(x, p)
    probs = torch.softmax(x, -1)
    keep = torch.isfinite(out)
    kept_sorted = torch.sort(probs[keep], descending=True).values
    # it reaches p (up to float rounding) unless everything was kept ...
    assert keep.all() or kept_sorted.sum() >= p - 1e-6
    # ... and dropping its least likely token would fall short of p
    assert kept_sorted[:-1].sum() < p + 1e-6
    # and nothing removed is more likely than anything kept
    if (~keep).any():
        assert probs[~keep].max() <= probs[keep].min()


# ---------------------------------------------------------------- top-k

def test_top_k_keeps_the_k_largest_and_ties_at_the_kth_value():
    flat = course.load_fixture("flat").logits(0)
    out = S.top_k_filter(flat, 3)
    assert kept(out) == sorted(torch.topk(flat, 3).indices.tolist())
    ties = course.load_fixture("ties").logits(0)
    assert kept(S.top_k_filter(ties, 1)) == [3, 6]  # both tokens equal to the 1st value
    assert torch.equal(S.top_k_filter(torch.zeros(5), 2), torch.zeros(5))
    assert torch.equal(S.top_k_filter(flat, 8), flat) and torch.equal(S.top_k_filter(flat, 99), flat)


@pytest.mark.parametrize("k", [1, 2, 5, 17, 50, 80])
def test_top_k_matches_transformers(k):
    for seed in range(5):
        x = random_logits(seed)
        assert torch.equal(S.top_k_filter(x, k), TopKLogitsWarper(k)(None, x.clone()))
    ties = course.load_fixture("ties").logits()
    assert torch.equal(S.top_k_filter(ties, 1), TopKLogitsWarper(1)(None, ties.clone()))


# ---------------------------------------------------------------- the pipeline

CONFIGS = [dict(temperature=0.7, top_k=5, top_p=0.9), dict(temperature=1.3, top_k=None, top_p=0.8),
           dict(temperature=2.0, top_k=3, top_p=1.0), dict(temperature=1.0, top_k=None, top_p=0.5),
           dict(temperature=0.5, top_k=20, top_p=0.95), dict(temperature=1.0, top_k=None, top_p=1.0)]


@pytest.mark.parametrize("cfg", CONFIGS, ids=[str(c) for c in CONFIGS])
def test_pipeline_matches_transformers_on_fixtures_and_random_logits(cfg):
    for name in ("peaked", "flat", "long_tail", "extreme_logits", "masked_logits", "json_bracket_risk"):
        x = course.load_fixture(name).logits()
        assert_same_distribution(S.filter_logits(x, **cfg), hf_pipeline(x, **cfg))
    for seed in range(5):
        x = random_logits(100 + seed)
        assert_same_distribution(S.filter_logits(x, **cfg), hf_pipeline(x, **cfg))


def test_order_matters_top_k_runs_before_top_p():
    x = torch.log(torch.tensor([0.4, 0.3, 0.2, 0.1]))
    # top-k first renormalises over {0.4, 0.3}: 0.57 already reaches 0.5, so one token
    assert kept(S.filter_logits(x, top_k=2, top_p=0.5)) == [0]
    assert kept(S.top_k_filter(S.top_p_filter(x, 0.5), 2)) == [0, 1]  # the other order keeps two


def test_order_matters_temperature_runs_first():
    x = course.load_fixture("long_tail").logits(0)
    hot = S.filter_logits(x, temperature=2.0, top_p=0.9)
    late = S.apply_temperature(S.top_p_filter(x, 0.9), 2.0)
    assert torch.isfinite(hot).sum() > torch.isfinite(late).sum()


def test_filters_return_new_tensors_and_leave_the_input_alone():
    x = random_logits(7)
    before = x.clone()
    for out in (S.top_p_filter(x, 0.9), S.top_p_filter(x, 1.0), S.top_k_filter(x, 5),
                S.top_k_filter(x, 500), S.apply_temperature(x, 1.0), S.filter_logits(x)):
        assert out is not x and out.data_ptr() != x.data_ptr()
    assert torch.equal(x, before)


def test_half_precision_logits_keep_their_dtype():
    x = random_logits(8).to(torch.bfloat16)
    out = S.filter_logits(x, temperature=0.8, top_k=10, top_p=0.9)
    assert out.dtype == torch.bfloat16 and torch.isfinite(out).sum(-1).min() >= 1


# ---------------------------------------------------------------- validation

@pytest.mark.parametrize("fn,kwargs,message", [
    (S.top_p_filter, dict(top_p=0), r"`top_p` must be in \(0, 1\], got 0\."),
    (S.top_p_filter, dict(top_p=1.5), r"`top_p` must be in \(0, 1\], got 1\.5\."),
    (S.top_p_filter, dict(top_p=-0.1), r"`top_p` .* got -0\.1\."),
    (S.top_p_filter, dict(top_p=math.nan), r"`top_p` .* got nan\."),
    (S.top_p_filter, dict(top_p="0.9"), r"`top_p` .* got '0\.9'\."),
    (S.top_p_filter, dict(top_p=True), r"`top_p` .* got True\."),
    (S.top_p_filter, dict(top_p=0.9, min_tokens_to_keep=0), r"`min_tokens_to_keep` must be an integer >= 1, got 0\."),
    (S.top_p_filter, dict(top_p=0.9, min_tokens_to_keep=1.5), r"`min_tokens_to_keep` .* got 1\.5\."),
    (S.top_k_filter, dict(top_k=0), r"`top_k` must be an integer >= 1, got 0\."),
    (S.top_k_filter, dict(top_k=2.0), r"`top_k` .* got 2\.0\."),
    (S.top_k_filter, dict(top_k=None), r"`top_k` .* got None\."),
    (S.apply_temperature, dict(temperature=0), r"`temperature` must be a finite number > 0, got 0\."),
    (S.apply_temperature, dict(temperature=math.inf), r"`temperature` .* got inf\."),
    (S.sample_token, dict(generator=None), r"`generator` must be a torch.Generator"),
    (S.sample_token, dict(generator=0), r"`generator` .* got 0\."),
])
def test_bad_parameters_raise_naming_parameter_and_value(fn, kwargs, message):
    with pytest.raises(ValueError, match=message):
        fn(torch.zeros(2, 4), **kwargs)


@pytest.mark.parametrize("bad,message", [
    (torch.tensor([0.0, math.nan]), "NaN"), (torch.tensor([0.0, math.inf]), r"\+inf"),
    (torch.full((2, 3), -math.inf), "all -inf"), (torch.zeros(2, 2, 2), "shape"),
    (torch.zeros(3, dtype=torch.long), "floating"), ([0.0, 1.0], "floating"),
])
def test_bad_logits_raise(bad, message):
    for fn in (lambda x: S.top_p_filter(x, 0.9), lambda x: S.top_k_filter(x, 2),
               lambda x: S.sample_token(x, torch.Generator())):
        with pytest.raises(ValueError, match=message):
            fn(bad)


# ---------------------------------------------------------------- sampling



CHI2_4_AT_0_001 = 18.467  # P(chi-square with 4 degrees of freedom >= 18.467) = 0.001 (tables)


def test_chi_square_helper_matches_a_table_value():
    stat = torch.tensor(CHI2_4_AT_0_001 / 2, dtype=torch.float64)
    assert abs(float(torch.special.gammaincc(torch.tensor(2.0, dtype=torch.float64), stat)) - 0.001) < 1e-5
    counts, probs = torch.tensor([10.0, 30.0]), torch.tensor([0.5, 0.5], dtype=torch.float64)
    assert chi_square(counts, probs)[:2] == (10.0, 1)  # (10-20)^2/20 + (30-20)^2/20


def test_sampled_frequencies_match_the_filtered_distribution():
    x = course.load_fixture("long_tail").logits(0)
    filtered = S.filter_logits(x, temperature=1.0, top_p=0.9)     # 5 tokens survive (0.895 < 0.9)
    keep = torch.isfinite(filtered)
    draws = S.sample_token(filtered.expand(40_000, -1), torch.Generator().manual_seed(1234))
    counts = torch.bincount(draws, minlength=x.numel()).double()
    assert counts[~keep].sum() == 0                                   # removed tokens: never
    stat, df, p_value = chi_square(counts[keep], torch.softmax(filtered, -1)[keep].double())
    assert df == 4 and stat < CHI2_4_AT_0_001, (stat, p_value)        # fixed seed: cannot flake


def test_a_biased_sampler_fails_the_same_check():
    # The check has teeth: sampling from the UNfiltered tail renormalised wrongly is caught.
    x = course.load_fixture("long_tail").logits(0)
    filtered = S.filter_logits(x, top_p=0.9)
    keep = torch.isfinite(filtered)
    wrong = S.sample_token(S.apply_temperature(filtered, 1.3).expand(40_000, -1), torch.Generator().manual_seed(1234))
    counts = torch.bincount(wrong, minlength=x.numel()).double()
    stat, _, _ = chi_square(counts[keep], torch.softmax(filtered, -1)[keep].double())
    assert stat > CHI2_4_AT_0_001


def test_sampling_uses_only_the_passed_generator():
    x = random_logits(3, rows=64, vocab=10, scale=1.0)
    torch.manual_seed(1)
    global_before = torch.get_rng_state()
    g = torch.Generator().manual_seed(42)
    state_before = g.get_state()
    a = S.sample_token(x, g)
    assert torch.equal(torch.get_rng_state(), global_before), "the global RNG was used"
    assert not torch.equal(g.get_state(), state_before), "the generator was not used"
    torch.manual_seed(999)
    b = S.sample_token(x, torch.Generator().manual_seed(42))
    assert torch.equal(a, b) and a.dtype == torch.long and a.shape == (64,)
    assert S.sample_token(x[0], torch.Generator().manual_seed(42)).shape == ()


def test_sample_next_greedy_at_temperature_zero_leaves_the_generator_alone():
    x = course.load_fixture("ties").logits()
    g = torch.Generator().manual_seed(0)
    before = g.get_state()
    assert S.sample_next(x, temperature=0, generator=g).tolist() == [3]  # lowest id of the tie
    assert torch.equal(g.get_state(), before)


def test_sample_next_equals_filter_then_sample():
    x = random_logits(5)
    a = S.sample_next(x, temperature=0.8, top_k=7, top_p=0.9, generator=torch.Generator().manual_seed(3))
    b = S.sample_token(S.filter_logits(x, temperature=0.8, top_k=7, top_p=0.9), torch.Generator().manual_seed(3))
    assert torch.equal(a, b)


# ---------------------------------------------------------------- SamplingParams

@pytest.mark.parametrize("kwargs,message", [
    (dict(temperature=-0.5), r"`temperature` must be a finite number >= 0 \(0 = greedy\), got -0\.5\."),
    (dict(temperature=math.nan), r"`temperature` .* got nan\."),
    (dict(top_k=0), r"`top_k` must be None \(off\) or an integer >= 1, got 0\."),
    (dict(top_k=-1), r"`top_k` .* got -1\."),
    (dict(top_p=0.0), r"`top_p` must be in \(0, 1\], got 0\.0\."),
    (dict(top_p=1.01), r"`top_p` .* got 1\.01\."),
    (dict(min_tokens_to_keep=0), r"`min_tokens_to_keep` .* got 0\."),
    (dict(seed="7"), r"`seed` must be None or an integer, got '7'\."),
])
def test_sampling_params_validate_up_front(kwargs, message):
    with pytest.raises(ValueError, match=message):
        S.SamplingParams(**kwargs)


def test_sampling_params_sampler_replays_a_run_with_course_generation():
    params = S.SamplingParams(temperature=1.5, top_p=0.95, seed=7)
    model = course.ScriptedModel("json_bracket_risk")

    def run():
        return generate(model, model.prompt(), max_tokens=model.fixture.params["max_tokens"],
                        sampler=params.sampler())
    first, second = run(), run()
    assert first.tokens == second.tokens and first.finish_reason == second.finish_reason
    record = course.ExperimentRecord("json_bracket_risk", params.to_dict(), params.seed, first.tokens,
                                     first.text, first.finish_reason)
    assert course.ExperimentRecord.from_json(record.to_json()).params["top_p"] == 0.95
    with pytest.raises(ValueError, match="`seed` must be set"):
        S.SamplingParams(temperature=1.0).sampler()
    greedy = S.SamplingParams(temperature=0).sampler()
    assert greedy(course.load_fixture("ties").logits(0)) == 3


@pytest.mark.gpu
def test_cuda_gives_the_cpu_kept_sets_and_reproducible_draws():
    x = random_logits(9, rows=64, vocab=1000)
    for cfg in CONFIGS:
        cpu, gpu = S.filter_logits(x, **cfg), S.filter_logits(x.cuda(), **cfg)
        assert gpu.device.type == "cuda"
        assert torch.equal(torch.isfinite(gpu).cpu(), torch.isfinite(cpu))
    filtered = S.filter_logits(x.cuda(), temperature=0.8, top_p=0.9)
    a = S.sample_token(filtered, torch.Generator(device="cuda").manual_seed(1))
    b = S.sample_token(filtered, torch.Generator(device="cuda").manual_seed(1))
    assert a.device.type == "cuda" and torch.equal(a, b)
    assert torch.isfinite(filtered.gather(-1, a[:, None])).all()
    sampler = S.SamplingParams(temperature=0.8, top_p=0.9, seed=3).sampler()
    assert isinstance(sampler(x[0].cuda()), int)

"""course.decoder and course.kv_cache: the readable GPT-2 must compute what
transformers computes, with and without the cache, and the caches must keep
their documented contract. Every expected value is computed by transformers in
the same test."""
import pytest
import torch

from course.decoder import CourseDecoder, DecoderConfig
from course.kv_cache import KVCache, KVCacheFullError, KVCacheSpec, StaticKVCache, kv_bytes_per_token
from course.tiny_model import TINY_MODEL_DIR

ATOL = 1e-4


pytestmark = pytest.mark.usefixtures("one_thread")  # fixture in conftest.py


@pytest.fixture(scope="module")
def hf_model():
    from transformers import GPT2LMHeadModel
    return GPT2LMHeadModel.from_pretrained(TINY_MODEL_DIR, local_files_only=True).eval()


@pytest.fixture(scope="module")
def decoder(hf_model):
    return CourseDecoder.from_pretrained(hf_model, device="cpu")


@pytest.fixture(scope="module")
def random_hf():
    """An untrained GPT-2 of another shape (untied head, odd sizes) so parity is
    not an accident of the shipped checkpoint."""
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=97, n_positions=48, n_embd=48, n_layer=3, n_head=6,
                     tie_word_embeddings=False, bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(cfg).eval()


def ids_batch(vocab, batch=2, length=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (batch, length), generator=g)   # (B, T)


def hf_logits(hf, ids, **kw):
    with torch.no_grad():
        return hf(ids, **kw).logits


def cached_logits(decoder, ids, n_prompt, chunk=1):
    """Prefill n_prompt tokens, then decode the rest `chunk` tokens at a time."""
    logits, kv = decoder.prefill(ids[:, :n_prompt])
    outs = [logits]
    for start in range(n_prompt, ids.shape[1], chunk):
        logits, kv = decoder.decode(ids[:, start:start + chunk], kv)
        outs.append(logits)
    assert kv.length == ids.shape[1]
    return torch.cat(outs, dim=1)   # (B, T, V)


# ---------------------------------------------------------------- parity

@pytest.mark.parametrize("which", ["shipped", "random_untied"])
def test_uncached_logits_match_transformers_at_every_position(which, decoder, hf_model, random_hf):
    hf = hf_model if which == "shipped" else random_hf
    dec = decoder if which == "shipped" else CourseDecoder.from_pretrained(random_hf)
    ids = ids_batch(hf.config.vocab_size, batch=2, length=min(40, hf.config.n_positions))
    got, want = dec(ids), hf_logits(hf, ids)
    assert got.shape == want.shape == (2, ids.shape[1], hf.config.vocab_size)
    assert (got - want).abs().max().item() <= ATOL


@pytest.mark.parametrize("chunk", [1, 3])
def test_cached_logits_match_transformers_at_every_position(chunk, decoder, hf_model):
    ids = ids_batch(hf_model.config.vocab_size, batch=2, length=30, seed=1)
    want = hf_logits(hf_model, ids)
    got = cached_logits(decoder, ids, n_prompt=7, chunk=chunk)
    assert got.shape == want.shape
    assert (got - want).abs().max().item() <= ATOL


def test_static_cache_matches_transformers(hf_model):
    dec = CourseDecoder.from_pretrained(hf_model, cache_factory=StaticKVCache.from_spec)
    ids = ids_batch(hf_model.config.vocab_size, batch=2, length=20, seed=2)
    got = cached_logits(dec, ids, n_prompt=5)
    assert (got - hf_logits(hf_model, ids)).abs().max().item() <= ATOL


def test_left_padding_matches_transformers_on_real_tokens(decoder, hf_model):
    ids = ids_batch(hf_model.config.vocab_size, batch=2, length=16, seed=3)
    mask = torch.ones_like(ids)
    mask[1, :5] = 0                                   # row 1 is left-padded by 5
    pos = (mask.cumsum(-1) - 1).clamp(min=0)          # what generate() uses for GPT-2
    want = hf_logits(hf_model, ids, attention_mask=mask, position_ids=pos)
    got = decoder(ids, attention_mask=mask)
    real = mask.bool()
    assert (got - want)[real].abs().max().item() <= ATOL
    # and through the cache, the mask growing with each decoded token
    logits, kv = decoder.prefill(ids[:, :10], attention_mask=mask[:, :10])
    outs = [logits]
    for i in range(10, 16):
        logits, kv = decoder.decode(ids[:, i:i + 1], kv, attention_mask=mask[:, :i + 1])
        outs.append(logits)
    assert (torch.cat(outs, 1) - want)[real].abs().max().item() <= ATOL


def test_greedy_cached_equals_uncached_equals_transformers_generate(decoder, hf_model):
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(TINY_MODEL_DIR, local_files_only=True)
    ids = tok(["User: weather in Rome\nCall: ", "User: time in Cairo\nCall: "], return_tensors="pt").input_ids
    assert ids.shape[1] == tok("User: time in Cairo\nCall: ", return_tensors="pt").input_ids.shape[1]
    cached = decoder.generate_greedy(ids, 40, eos_token_id=tok.eos_token_id, use_cache=True)
    uncached = decoder.generate_greedy(ids, 40, eos_token_id=tok.eos_token_id, use_cache=False)
    with torch.no_grad():
        ref = hf_model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=40, do_sample=False,
                                eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id)
    assert torch.equal(cached, uncached)
    assert torch.equal(cached, ref)


def test_greedy_without_eos_runs_to_max_new_tokens(decoder):
    ids = ids_batch(decoder.config.vocab_size, batch=1, length=5)
    out = decoder.generate_greedy(ids, 7)
    assert out.shape == (1, 12) and torch.equal(out[:, :5], ids)


def test_greedy_left_padded_batch_matches_transformers(decoder, hf_model):
    ids = ids_batch(hf_model.config.vocab_size, batch=2, length=9, seed=4)
    mask = torch.ones_like(ids)
    mask[0, :3] = 0
    with torch.no_grad():
        ref = hf_model.generate(ids, attention_mask=mask, max_new_tokens=12, do_sample=False,
                                eos_token_id=None, pad_token_id=0)
    got = decoder.generate_greedy(ids, 12, attention_mask=mask)
    assert torch.equal(got, ref)


# ---------------------------------------------------------------- causality

def test_changing_a_later_token_leaves_earlier_logits_unchanged(decoder):
    ids = ids_batch(decoder.config.vocab_size, batch=2, length=20, seed=5)
    other = ids.clone()
    other[:, 12] = (other[:, 12] + 1) % decoder.config.vocab_size
    a, b = decoder(ids), decoder(other)
    assert torch.equal(a[:, :12], b[:, :12])          # positions before the change: bit for bit
    assert (a[:, 12:] - b[:, 12:]).abs().max() > 1e-3  # the change is visible from there on
    ca, cb = cached_logits(decoder, ids, 4), cached_logits(decoder, other, 4)
    assert torch.equal(ca[:, :12], cb[:, :12])


# ---------------------------------------------------------------- the caches

def test_kv_bytes_per_token_formula():
    assert kv_bytes_per_token(n_layer=4, n_kv_heads=4, head_dim=32, dtype_bytes=4) == 2 * 4 * 4 * 32 * 4
    assert kv_bytes_per_token(32, 32, 128, 2) == 524288   # a 7B-class model in fp16: 0.5 MiB per token
    assert kv_bytes_per_token(32, 8, 128, 2) == 131072    # Llama-3-8B, GQA with 8 K/V heads: 128 KiB


def test_dynamic_cache_bytes_match_formula_after_prefill_and_decode(decoder):
    c = decoder.config
    per_token = kv_bytes_per_token(c.n_layer, c.n_head, c.head_dim, 4)
    ids = ids_batch(c.vocab_size, batch=2, length=11)
    _, kv = decoder.prefill(ids)
    assert isinstance(kv, KVCache) and kv.length == 11
    assert kv.bytes_allocated() == 2 * 11 * per_token
    _, kv = decoder.decode(ids[:, :1], kv)
    assert kv.bytes_allocated() == 2 * 12 * per_token
    kv.release()
    assert kv.length == 0 and kv.bytes_allocated() == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_static_cache_allocates_max_len_up_front(dtype):
    kv = StaticKVCache(n_layer=3, batch=2, n_head=4, max_len=10, head_dim=8, dtype=dtype, device="cpu")
    dtype_bytes = torch.empty((), dtype=dtype).element_size()
    assert kv.bytes_allocated() == 2 * 10 * kv_bytes_per_token(3, 4, 8, dtype_bytes)
    assert kv.length == 0
    kv.release()
    assert kv.bytes_allocated() == 0
    with pytest.raises(RuntimeError, match="released"):
        kv.append(0, torch.zeros(2, 4, 1, 8, dtype=dtype), torch.zeros(2, 4, 1, 8, dtype=dtype))


def test_static_cache_full_raises_clear_error():
    kv = StaticKVCache(n_layer=1, batch=1, n_head=2, max_len=4, head_dim=3)
    k = torch.randn(1, 2, 3, 3)
    k_all, v_all = kv.append(0, k, k * 2)
    assert torch.equal(k_all, k) and torch.equal(v_all, k * 2) and kv.length == 3
    with pytest.raises(KVCacheFullError, match=r"full: layer 0 holds 3 of max_len=4 tokens and cannot take 2 more"):
        kv.append(0, torch.randn(1, 2, 2, 3), torch.randn(1, 2, 2, 3))
    kv.append(0, torch.randn(1, 2, 1, 3), torch.randn(1, 2, 1, 3))   # exactly full is fine
    assert kv.length == 4


def test_decoder_past_its_static_cache_raises_full(hf_model):
    dec = CourseDecoder.from_pretrained(hf_model)
    ids = ids_batch(dec.config.vocab_size, batch=1, length=4)
    kv = StaticKVCache(dec.config.n_layer, 1, dec.config.n_head, 5, dec.config.head_dim)
    _, kv = dec.prefill(ids, kv=kv)
    _, kv = dec.decode(ids[:, :1], kv)
    with pytest.raises(KVCacheFullError):
        dec.decode(ids[:, :1], kv)


def test_cache_append_returns_everything_in_order():
    kv = KVCache(n_layer=2)
    a, b = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 1, 4)
    kv.append(0, a, a)
    assert kv.length == 0                         # layer 1 holds nothing yet
    kv.append(1, a, a)
    k_all, v_all = kv.append(0, b, -b)
    assert torch.equal(k_all, torch.cat([a, b], 2)) and torch.equal(v_all, torch.cat([a, -b], 2))
    assert kv.length == 3


def test_cache_factory_is_pluggable(hf_model):
    seen = []

    class RecordingCache(KVCache):
        def append(self, layer, k, v):
            seen.append((layer, k.shape[2]))
            return super().append(layer, k, v)

    specs = []

    def factory(spec):
        specs.append(spec)
        return RecordingCache(spec.n_layer, spec.device)

    dec = CourseDecoder.from_pretrained(hf_model, cache_factory=factory)
    ids = ids_batch(dec.config.vocab_size, batch=1, length=6)
    out = dec.generate_greedy(ids, 3)
    n = dec.config.n_layer
    assert seen == [(i, 6) for i in range(n)] + [(i, 1) for i in range(n)] * 2
    assert isinstance(specs[0], KVCacheSpec) and specs[0].max_len == 9 and specs[0].batch == 1
    assert torch.equal(out, CourseDecoder.from_pretrained(hf_model).generate_greedy(ids, 3))


# ---------------------------------------------------------------- validation

@pytest.mark.parametrize("bad, message", [
    (dict(max_new_tokens=0), "`max_new_tokens` must be an integer >= 1, got 0."),
    (dict(max_new_tokens=2.0), "`max_new_tokens` must be an integer >= 1, got 2.0."),
    (dict(max_new_tokens=True), "`max_new_tokens` must be an integer >= 1, got True."),
    (dict(max_new_tokens=3, eos_token_id=-1), "`eos_token_id` must be None or an integer in [0, "),
    (dict(max_new_tokens=3, use_cache="yes"), "`use_cache` must be a bool, got 'yes'."),
    (dict(max_new_tokens=5000), "`max_new_tokens` must be <= n_positions - prompt length"),
])
def test_generate_greedy_rejects_bad_arguments(decoder, bad, message):
    ids = ids_batch(decoder.config.vocab_size, batch=1, length=4)
    with pytest.raises(ValueError) as e:
        decoder.generate_greedy(ids, **bad)
    assert message in str(e.value)


@pytest.mark.parametrize("bad, message", [
    (torch.tensor([1, 2, 3]), "`input_ids` must be a 2-D tensor (batch, tokens), got shape (3,)."),
    ([[1, 2, 3]], "`input_ids` must be a 2-D tensor (batch, tokens), got list."),
    (torch.tensor([[1.0, 2.0]]), "`input_ids` must hold integer token ids, got dtype torch.float32."),
    (torch.tensor([[1, 100000]]), "`input_ids` must hold ids in [0, "),
    (torch.tensor([[-1, 2]]), "got -1."),
    (torch.zeros(1, 0, dtype=torch.long), "`input_ids` must have at least one row and one token"),
    (torch.zeros(1, 1025, dtype=torch.long), "more than n_positions=1024"),
])
def test_bad_input_ids_raise_value_error_naming_them(decoder, bad, message):
    for call in (decoder, decoder.prefill, lambda x: decoder.generate_greedy(x, 1)):
        with pytest.raises(ValueError) as e:
            call(bad)
        assert message in str(e.value)


def test_decode_rejects_missing_or_empty_cache(decoder):
    one = torch.tensor([[1]])
    with pytest.raises(ValueError, match="`kv` must be the cache returned by prefill or decode, got NoneType."):
        decoder.decode(one, None)
    with pytest.raises(ValueError, match="`kv` must hold the prompt"):
        decoder.decode(one, decoder.new_cache(1))
    with pytest.raises(ValueError, match=r"`token_ids` must be a 2-D tensor"):
        _, kv = decoder.prefill(torch.tensor([[1, 2]]))
        decoder.decode(torch.tensor([3]), kv)


def test_bad_attention_mask_and_configs_raise(decoder):
    ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match=r"`attention_mask` must be a \(batch, past \+ new\) = \(1, 3\)"):
        decoder(ids, attention_mask=torch.ones(1, 2))
    with pytest.raises(ValueError, match="`attention_mask` must be 1 at the last position"):
        decoder(ids, attention_mask=torch.tensor([[1, 1, 0]]))
    with pytest.raises(ValueError, match="`n_embd` must be divisible by n_head=3, got 8."):
        DecoderConfig(vocab_size=10, n_embd=8, n_head=3)
    with pytest.raises(ValueError, match="`path_or_hf_model` must be a folder path or a transformers"):
        CourseDecoder.from_pretrained(42)


@pytest.mark.parametrize("call, message", [
    (lambda: kv_bytes_per_token(0, 4, 32, 4), "`n_layer` must be an integer >= 1, got 0."),
    (lambda: kv_bytes_per_token(4, 4, 32, 2.0), "`dtype_bytes` must be an integer >= 1, got 2.0."),
    (lambda: StaticKVCache(1, 1, 1, 0, 1), "`max_len` must be an integer >= 1, got 0."),
    (lambda: StaticKVCache(1, 1, 1, 4, 1, dtype=torch.int64), "`dtype` must be a floating torch.dtype"),
    (lambda: KVCache(2).append(2, torch.zeros(1, 1, 1, 1), torch.zeros(1, 1, 1, 1)),
     "`layer` must be an integer in [0, 2), got 2."),
    (lambda: KVCache(1).append(0, torch.zeros(1, 1, 1), torch.zeros(1, 1, 1)),
     "`k` must be a 4-D tensor (B, H, t, D), got (1, 1, 1)."),
    (lambda: StaticKVCache(1, 1, 2, 4, 3).append(0, torch.zeros(1, 1, 1, 3), torch.zeros(1, 1, 1, 3)),
     "`k` must be (B, H, t, D) = (1, 2, t, 3), got (1, 1, 1, 3)."),
])
def test_cache_arguments_are_validated(call, message):
    with pytest.raises(ValueError) as e:
        call()
    assert message in str(e.value)


# ---------------------------------------------------------------- GPU

@pytest.mark.gpu
def test_parity_on_cuda(hf_model):
    import copy
    hf = copy.deepcopy(hf_model).to("cuda")
    dec = CourseDecoder.from_pretrained(hf)
    assert dec.device.type == "cuda"
    ids = ids_batch(hf.config.vocab_size, batch=2, length=64).to("cuda")
    want = hf_logits(hf, ids)
    assert (dec(ids) - want).abs().max().item() <= ATOL
    assert (cached_logits(dec, ids, 16) - want).abs().max().item() <= ATOL
    static = CourseDecoder.from_pretrained(hf, cache_factory=StaticKVCache.from_spec)
    assert torch.equal(static.generate_greedy(ids[:, :8], 20), dec.generate_greedy(ids[:, :8], 20, use_cache=False))

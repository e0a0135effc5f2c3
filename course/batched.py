"""One forward pass for many requests, each with its own paged KV cache.

    model = BatchedDecoder(decoder)                    # or ScriptedBatchedModel(...)
    pool = model.new_pool(num_blocks=64, block_size=16)
    caches = [PagedKVCache(pool) for _ in requests]
    logits = model.forward_batch(token_ids, caches)    # (B, V): next-token logits per request

`token_ids[i]` is everything request i has so far (prompt + generated tokens) and
`caches[i]` holds the keys and values of its first `caches[i].length` tokens. The
forward feeds each request only what its cache is missing:

    a new request          its cache is empty     -> its whole prompt   (prefill)
    a running request      one token is missing   -> that token         (decode)
    a preempted request    its cache was released -> everything again   (recompute)

so prefills, decodes and recomputes share one batch. Rows are LEFT-padded to a common
width and the padding is masked out of attention (as transformers' generate does), so
each row computes what it would compute alone: the same greedy tokens, the same
logits up to float rounding (the tests hold them within 1e-4 on the tiny model).

How it plugs into course.decoder: the decoder reads `kv.length` once (where the new
tokens start) and calls `kv.append(layer, k, v)` once per layer. _BatchView is that
cache for the whole batch: it writes each row's real new keys/values into the row's
own cache and hands back every row's keys/values, right-aligned in one padded tensor.
When every row is a PagedKVCache on one pool (the engine's case), _PagedBatchView does
the same with one indexed store and one indexed gather per layer for the whole batch
instead of a loop over rows. The decoder never knows the rows live in different blocks.
For a plain CourseDecoder in that case, BatchedDecoder._run_paged runs the decoder's own
weights through the same network in fewer tensor ops (at the tiny model's size a step's
time is mostly the number of ops): course/decoder.py stays the one to read.

    batch view, 3 rows, width T = 6 (p = pad, c = cached, n = new):
        row 0  p p p c c n        decode: 2 cached + 1 new
        row 1  n n n n n n        prefill: a 6-token prompt
        row 2  p p p n n n        prefill: a 3-token prompt
                     ^-- the last t = 3 columns are the queries; pad queries are ignored

ScriptedBatchedModel has the same surface with scripted logits, so an engine can be
tested on exact, hand-written sequences; SimulatedCost charges each forward pass
`fixed + per_token * tokens` seconds on a FakeClock, a cost model for throughput.

The request types an engine speaks (EngineConfig, RequestParams, RequestOutput,
QueueFull, RequestRefused) live here too, so a lab can write the engine itself
(course.engine holds the course's answer) on top of them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from ._checks import check_int, check_number, check_type, is_int
from .decoder import CourseDecoder
from .finish import FinishReason
from .generation import validate_params
from .paged_kv import KVPool, PagedKVCache
from .sampling import SamplingParams
from .scripted import ScriptedModelError

__all__ = ["BatchedDecoder", "ScriptedBatchedModel", "SimulatedCost", "as_batched", "check_rows",
           "solo_greedy", "EngineConfig", "RequestParams", "RequestOutput", "QueueFull", "RequestRefused"]


# ---------------------------------------------------------------- what an engine takes and returns

class QueueFull(RuntimeError):
    """The waiting queue holds max_waiting requests: refuse now (HTTP 429), do not queue forever."""


class RequestRefused(ValueError):
    """The request can never run: it does not fit the KV pool or the model's context."""


@dataclass(frozen=True)
class EngineConfig:
    """num_blocks, block_size: the KV pool. max_batch: most running requests at once.
    watermark_blocks: blocks admission leaves free, so running requests can keep
    decoding without an immediate preemption. max_waiting: the queue limit.
    max_overtakes: how many requests that arrived later may be admitted while one
    request waits, over its whole life (0: strict first come, first served)."""
    num_blocks: int = 256
    block_size: int = 16
    max_batch: int = 16
    watermark_blocks: int = 1
    max_waiting: int = 256
    max_overtakes: int = 0

    def __post_init__(self) -> None:
        check_int("num_blocks", self.num_blocks, 1)
        check_int("block_size", self.block_size, 1)
        check_int("max_batch", self.max_batch, 1)
        check_int("watermark_blocks", self.watermark_blocks, 0, self.num_blocks - 1)
        check_int("max_waiting", self.max_waiting, 0)
        check_int("max_overtakes", self.max_overtakes, 0)


@dataclass(frozen=True)
class RequestParams:
    """Sampling and stopping parameters of one request, checked when made.

    temperature 0 is greedy; a sampled request draws from its own generator seeded
    with `seed` (a random seed when None). deadline: seconds on the engine's clock
    from add_request. ignore_eos: keep going past EOS (benchmarks use it). priority:
    as in vLLM, a lower value asks to be served earlier (default 0); an engine whose
    policy ignores it is still correct, and max_overtakes bounds how far it can reach.
    """
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    seed: int | None = None
    max_tokens: int = 16
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    deadline: float | None = None
    include_stop_str_in_output: bool = False
    priority: int = 0

    def __post_init__(self) -> None:
        check_int("priority", self.priority)
        SamplingParams(temperature=self.temperature, top_k=self.top_k, top_p=self.top_p, seed=self.seed)
        p = validate_params(max_tokens=self.max_tokens, stop=_as_list(self.stop),
                            stop_token_ids=_as_list(self.stop_token_ids),
                            include_stop_str_in_output=self.include_stop_str_in_output, deadline=self.deadline)
        if type(self.ignore_eos) is not bool:
            raise ValueError(f"`ignore_eos` must be True or False, got {self.ignore_eos!r}.")
        object.__setattr__(self, "stop", tuple(p["stop"]))
        object.__setattr__(self, "stop_token_ids", tuple(p["stop_token_ids"]))

    @classmethod
    def coerce(cls, params) -> "RequestParams":
        """None, a RequestParams, a dict, or any object with some of these attributes
        (a course.sampling.SamplingParams, an API request): missing ones take the defaults."""
        if params is None:
            return cls()
        if isinstance(params, cls):
            return params
        names = [f.name for f in fields(cls)]
        if isinstance(params, dict):
            unknown = sorted(set(params) - set(names))
            if unknown:
                raise ValueError(f"`params` must use the names {names}, got unknown {unknown}.")
            values = {k: v for k, v in params.items() if v is not None or k in ("top_k", "seed", "deadline")}
        else:
            values = {n: getattr(params, n) for n in names if getattr(params, n, None) is not None}
        return cls(**values)


def _as_list(value):
    return list(value) if isinstance(value, (list, tuple)) else value


@dataclass
class RequestOutput:
    """What one step says about one request.

    new_token_ids: tokens sampled this step (the one that ended the request included).
    text_delta: new text that is safe to show: held back while it could still grow into
        a stop string; the ending token's or stop string's text is never shown.
    finish_reason: None while the request runs, then a FinishReason; stop_reason names
        the stop string or stop token id that fired. raw_token_ids: every token so far.
    """
    request_id: str
    new_token_ids: list[int]
    text_delta: str
    finish_reason: FinishReason | None = None
    stop_reason: str | int | None = None
    raw_token_ids: list[int] = field(default_factory=list)
    usage: dict = field(default_factory=dict)
    error: str | None = None

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None



# ---------------------------------------------------------------- the batched forward



def check_rows(token_ids, caches, vocab_size: int, max_context: int | None = None) -> list[list[int]]:
    """Validate a batch: equally many token lists and caches, ids in [0, vocab_size),
    and every row missing at least one token from its cache. Returns the lists."""
    if not isinstance(token_ids, (list, tuple)) or not token_ids:
        raise ValueError(f"`token_ids` must be a non-empty list of token-id lists, got {token_ids!r}.")
    if not isinstance(caches, (list, tuple)) or len(caches) != len(token_ids):
        got = len(caches) if isinstance(caches, (list, tuple)) else type(caches).__name__
        raise ValueError(f"`caches` must be a list with one cache per row ({len(token_ids)}), got {got}.")
    rows = []
    for i, (ids, cache) in enumerate(zip(token_ids, caches)):
        if not hasattr(cache, "length") or not hasattr(cache, "append"):
            raise ValueError(f"`caches[{i}]` must be a course cache (length, append), got {type(cache).__name__}.")
        # only the tokens fed now are checked: the cached ones were checked when they were fed
        if not isinstance(ids, (list, tuple)) or not all(
                is_int(t) and 0 <= t < vocab_size for t in ids[min(cache.length, len(ids)):]):
            raise ValueError(f"`token_ids[{i}]` must be a list of ids in [0, {vocab_size}), got {list(ids)!r}.")
        if cache.length >= len(ids):
            raise ValueError(f"`token_ids[{i}]` must hold a token its cache lacks: {len(ids)} tokens, "
                             f"{cache.length} already cached.")
        if max_context is not None and len(ids) > max_context:
            raise ValueError(f"`token_ids[{i}]` must hold at most {max_context} tokens (the model's context), "
                             f"got {len(ids)}.")
        rows.append(list(ids))
    return rows


class _BatchView:
    """The cache the decoder sees during one batched forward (see the module docstring).

    length = T - t: the decoder places the t query columns after it. append writes
    each row's real new tokens into the row's own cache and returns every row's
    keys/values right-aligned in a (B, H, T, D) tensor (zeros where padded).
    """

    def __init__(self, caches, n_new: list[int], width: int, t: int) -> None:
        self.caches, self.n_new, self.width = caches, n_new, width
        self.length = width - t

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        B, H, t, D = k.shape                                             # (B, H, t, D)
        k_all = k.new_zeros(B, H, self.width, D)                         # (B, H, T, D)
        v_all = v.new_zeros(B, H, self.width, D)
        for i, cache in enumerate(self.caches):
            n = self.n_new[i]
            ki, vi = cache.append(layer, k[i:i + 1, :, t - n:], v[i:i + 1, :, t - n:])   # (1, H, L_i, D)
            L = ki.shape[2]
            k_all[i, :, self.width - L:] = ki[0]
            v_all[i, :, self.width - L:] = vi[0]
        return k_all, v_all


class _PagedBatchView:
    """_BatchView for rows that all live in one KVPool, without a Python loop per row and
    layer. The pool's layer buffer (N, H, bs, D) is read as rows of D numbers, one per
    (block, head, slot); every index into it is built once per forward, as tensors:

        pos   (B, T)   token position of key column j of row i (pad columns: 0, masked)
        blk   (B, T)   its block, table[pos // bs];  slot = pos % bs
        read  (B*H*T,) the pool row of (row i, head h, column j): (blk * H + h) * bs + slot
        write (n*H,)   the pool rows of the n real new tokens, in the order k is laid out

    so each layer costs one index_copy_ (the new keys and values) and one index_select
    (every row's keys and values, padded), whatever the batch holds.
    """

    def __init__(self, caches, past: list[int], n_new: list[int], width: int, t: int) -> None:
        self.caches, self.n_new = caches, n_new
        self.pool = pool = caches[0].pool
        self.length = width - t
        bs, H, device = pool.block_size, pool.n_kv_heads, pool.device
        tables = []
        for cache, p, n in zip(caches, past, n_new):
            table = cache.block_table
            if p + n > len(table) * bs:                        # an engine has usually reserved them already
                cache.reserve(n)                               # blocks first: may raise OutOfBlocks, nothing written
                table = cache.block_table
            tables.append(table)
        most = max(len(table) for table in tables)
        table = torch.tensor([tb + tb[-1:] * (most - len(tb)) for tb in tables], device=device)   # (B, nb)
        start = torch.tensor([width - p - n for p, n in zip(past, n_new)], device=device)        # (B,) pads
        col = torch.arange(width, device=device)                                                  # (T,)
        pos = (col - start[:, None]).clamp(min=0)                                                 # (B, T)
        # (blk * H + h) * bs + slot = head 0's pool row + h * bs: one sum per head, not four ops
        head0 = (table.gather(1, pos // bs) * (H * bs)).add_(pos % bs)                            # (B, T)
        heads = torch.arange(0, H * bs, bs, device=device)                                        # (H,) h * bs
        self.read = (head0[:, None, :] + heads[:, None]).flatten()                               # (B*H*T,)
        self.shape = (len(caches), H, width, pool.head_dim)
        # The query columns that are real new tokens (a shorter row is left-padded).
        queries = col[width - t:]                                                                 # (t,)
        self.new = None if min(n_new) == t else queries >= (width - torch.tensor(n_new, device=device))[:, None]
        written = head0[:, width - t:]                                                            # (B, t)
        if self.new is not None:
            written = written[self.new]                                                           # (n,)
        self.write = (written.reshape(-1, 1) + heads).flatten()                                   # (n*H,)

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        out = []
        for buf, x in ((self.pool.k[layer], k), (self.pool.v[layer], v)):
            rows = buf.view(-1, buf.shape[-1])                                # (N*H*bs, D) view of the pool
            x = x.transpose(1, 2)                                            # (B, t, H, D)
            x = x.reshape(-1, x.shape[-1]) if self.new is None else x[self.new].reshape(-1, x.shape[-1])
            rows.index_copy_(0, self.write, x)                               # (n*H, D) new tokens
            out.append(rows.index_select(0, self.read).view(self.shape))    # (B, H, T, D)
        for cache, n in zip(self.caches, self.n_new):
            cache.filled[layer] += n
        return out[0], out[1]


def _pair(module) -> tuple[torch.Tensor, torch.Tensor]:
    return module.weight, module.bias


class BatchedDecoder:
    """A course.decoder.CourseDecoder that runs many paged-cache requests in one forward."""

    def __init__(self, decoder: CourseDecoder) -> None:
        check_type("decoder", decoder, CourseDecoder, "a course.decoder.CourseDecoder")
        self.decoder = decoder
        if type(decoder) is CourseDecoder:      # the network _run_paged runs
            # The tensors _run_paged reads, looked up once: an nn.Module attribute lookup
            # costs about as much as a small tensor op. They are the decoder's own
            # Parameters, so in-place changes (load_state_dict, .to()) show here too.
            self._layers = [SimpleNamespace(ln_1=_pair(b.ln_1), c_attn=_pair(b.attn.c_attn),
                                            attn_proj=_pair(b.attn.c_proj), ln_2=_pair(b.ln_2),
                                            c_fc=_pair(b.mlp.c_fc), mlp_proj=_pair(b.mlp.c_proj))
                            for b in decoder.h]
            self._ends = SimpleNamespace(wte=decoder.wte.weight, wpe=decoder.wpe.weight, ln_f=_pair(decoder.ln_f),
                                         lm_head=decoder.lm_head.weight)
        self.vocab_size = decoder.config.vocab_size
        self.max_context = decoder.config.n_positions
        self.eos_token_id = None          # the tokenizer knows it; the engine asks there

    @property
    def device(self) -> torch.device:
        return self.decoder.device

    def new_pool(self, num_blocks: int, block_size: int) -> KVPool:
        """A KV pool shaped for this decoder (its layers, heads, dtype and device)."""
        return KVPool.for_decoder(self.decoder, num_blocks, block_size)

    @torch.no_grad()
    def forward_batch(self, token_ids, caches) -> torch.Tensor:
        """Feed every row the tokens its cache lacks; return next-token logits (B, V).

        Each cache grows by those tokens (it may raise OutOfBlocks: reserve first).
        """
        rows = check_rows(token_ids, caches, self.vocab_size, self.max_context)
        past = [c.length for c in caches]
        n_new = [len(ids) - p for ids, p in zip(rows, past)]
        t = max(n_new)                                                   # query columns
        width = max(p + n for p, n in zip(past, n_new))                  # T: keys per row after padding
        device = self.device
        ids = torch.tensor([[0] * (t - n) + row[p:] for row, p, n in zip(rows, past, n_new)])   # (B, t), pad id 0
        lengths = torch.tensor([p + n for p, n in zip(past, n_new)])
        mask = torch.arange(width) >= (width - lengths)[:, None]         # (B, T), True = a real token
        caches = list(caches)
        paged = all(type(c) is PagedKVCache and c.pool is caches[0].pool for c in caches) \
            and caches[0].pool.dtype == self.decoder.wte.weight.dtype
        if paged and type(self.decoder) is CourseDecoder:
            # inference_mode also skips autograd's bookkeeping that no_grad keeps on every op
            # (about a tenth of a step's time here). Writes go into the pool, made outside it;
            # the logits are cloned out of it, so a caller may still change them in place.
            with torch.inference_mode():
                view = _PagedBatchView(caches, past, n_new, width, t)
                logits = self._run_paged(ids.to(device), view, mask.to(device))    # (B, V)
            return logits.clone()
        view = _PagedBatchView(caches, past, n_new, width, t) if paged else _BatchView(caches, n_new, width, t)
        logits = self.decoder._run(ids.to(device), view, mask.to(device))   # (B, t, V)
        return logits[:, -1, :]                                          # (B, V): each row's last token

    def _run_paged(self, ids: torch.Tensor, view: "_PagedBatchView", mask: torch.Tensor) -> torch.Tensor:
        """CourseDecoder._run for one paged batch, the same network in fewer tensor ops
        (an engine runs this once per step, and at the tiny model's size a step's time
        is mostly the number of ops, not their arithmetic): the mask is built once as an
        additive bias, attention is one scaled_dot_product_attention call, the layers are
        called without nn.Module's hooks, and only each row's last column goes through
        ln_f and the vocabulary projection. Returns next-token logits (B, V)."""
        d = self.decoder
        B, t = ids.shape
        T, C, H = mask.shape[1], d.config.n_embd, d.config.n_head
        pos = (mask.long().cumsum(-1) - 1).clamp(min=0)[:, T - t:]          # (B, t): a row starts at 0
        allowed = mask[:, None, None, :]                                     # (B, 1, 1, T)
        if t > 1:   # query i (key column T - t + i) may see key columns 0 .. T - t + i
            allowed = allowed & torch.ones(t, T, dtype=torch.bool, device=ids.device).tril(diagonal=T - t)
        e = self._ends
        x = F.embedding(ids, e.wte) + F.embedding(pos, e.wpe)                # (B, t, C)
        # finfo.min, not -inf, as in the decoder: a left-pad query row sees no key at all
        bias = torch.zeros(allowed.shape, dtype=x.dtype, device=x.device).masked_fill_(
            ~allowed, torch.finfo(x.dtype).min)                              # (B, 1, t or 1, T)
        eps = d.config.layer_norm_eps
        for layer, w in enumerate(self._layers):                            # (weight, bias) pairs
            h = F.layer_norm(x, (C,), *w.ln_1, eps)
            qkv = F.linear(h, *w.c_attn)                                     # (B, t, 3C)
            q, k, v = qkv.view(B, t, 3, H, C // H).permute(2, 0, 3, 1, 4)    # 3 x (B, H, t, D)
            k, v = view.append(layer, k, v)                                  # (B, H, T, D)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)      # (B, H, t, D)
            x = x + F.linear(y.transpose(1, 2).reshape(B, t, C), *w.attn_proj)
            h = F.layer_norm(x, (C,), *w.ln_2, eps)
            h = F.gelu(F.linear(h, *w.c_fc), approximate="tanh")
            x = x + F.linear(h, *w.mlp_proj)                                 # (B, t, C)
        last = F.layer_norm(x[:, -1], (C,), *e.ln_f, eps)                    # (B, C)
        return F.linear(last, e.lm_head)                                     # (B, V)

    def __repr__(self) -> str:
        return f"BatchedDecoder({self.decoder.config})"


class ScriptedBatchedModel:
    """A batched model that plays written scripts, with the surface of BatchedDecoder.

    vocab: the token strings (the id is the index); decode(ids) joins them.
    scripts: {prompt (tuple of ids): [token the model prefers at step 0, 1, ...]}. At
        step s of a request (s tokens generated so far) the logits are 0 except
        `margin` at script[s] and margin / 2 at the next id, so greedy decoding plays
        the script exactly and sampling has a real choice. A script may instead be a
        (steps, V) float tensor of logits, replayed row by row (from_fixture does that).
        A step past the end of a script raises ScriptedModelError: the engine missed a
        stop condition.
    raise_at: {prompt: step}: a forward that includes that request at that step
        raises ScriptedModelError (a crashing model; the whole batch call fails).
    nan_at: {prompt: step}: that request's logits row is NaN at that step.
    Caches really grow (one layer, one head, head_dim 1, zeros), so KV blocks are
    taken and freed exactly as with the real decoder.
    `calls` records each forward: a list of (prompt, cached tokens, new tokens) per row.
    """

    def __init__(self, vocab, scripts: dict, *, eos_token_id: int | None = None, raise_at: dict | None = None,
                 nan_at: dict | None = None, margin: float = 4.0, max_context: int = 1024) -> None:
        if not isinstance(vocab, (list, tuple)) or len(vocab) < 2 or not all(isinstance(s, str) for s in vocab):
            raise ValueError(f"`vocab` must be a list of at least 2 strings, got {vocab!r}.")
        self.vocab = tuple(vocab)
        self.vocab_size = len(self.vocab)
        if eos_token_id is not None:
            check_int("eos_token_id", eos_token_id, 0, self.vocab_size - 1)
        self.eos_token_id = eos_token_id
        self.scripts = {self._prompt("scripts", p): self._script(s) for p, s in dict(scripts).items()}
        self.raise_at = {self._prompt("raise_at", p): check_int("raise_at step", s, 0)
                         for p, s in dict(raise_at or {}).items()}
        self.nan_at = {self._prompt("nan_at", p): check_int("nan_at step", s, 0)
                       for p, s in dict(nan_at or {}).items()}
        self.margin = check_number("margin", margin, 0, lo_open=True)
        self.max_context = check_int("max_context", max_context, 1)
        self.device = torch.device("cpu")
        self.calls: list[list[tuple[tuple[int, ...], int, int]]] = []

    @classmethod
    def from_fixture(cls, fixture, *, raise_at: int | None = None, nan_at: int | None = None) -> "ScriptedBatchedModel":
        """Replay a course fixture (or its name): its vocab, EOS and per-step logits for its
        prompt, with a ScriptedModel's raise_at / nan_at steps."""
        from . import fixtures as _fixtures
        fx = _fixtures.load(fixture) if isinstance(fixture, str) else fixture
        check_type("fixture", fx, _fixtures.Fixture, "a Fixture or a fixture name")
        prompt = tuple(fx.prompt_ids)
        return cls(fx.vocab, {prompt: fx.logits()}, eos_token_id=fx.eos_token_id,
                   raise_at=None if raise_at is None else {prompt: raise_at},
                   nan_at=None if nan_at is None else {prompt: nan_at})

    def _script(self, script):
        if isinstance(script, torch.Tensor):
            if script.dim() != 2 or script.shape[1] != self.vocab_size or not script.is_floating_point():
                raise ValueError(f"`scripts` tensors must be (steps, {self.vocab_size}) floating logits, "
                                 f"got shape {tuple(script.shape)} {script.dtype}.")
            return script.float().clone()
        return self._ids("scripts", script)

    def _ids(self, name, ids) -> list[int]:
        if not isinstance(ids, (list, tuple)) or not all(is_int(t) and 0 <= t < self.vocab_size for t in ids):
            raise ValueError(f"`{name}` must hold lists of ids in [0, {self.vocab_size}), got {ids!r}.")
        return list(ids)

    def _prompt(self, name, prompt) -> tuple[int, ...]:
        ids = self._ids(name, prompt)
        if not ids:
            raise ValueError(f"`{name}` must key each script by a non-empty prompt, got {prompt!r}.")
        return tuple(ids)

    def decode(self, token_ids) -> str:
        return "".join(self.vocab[int(t)] for t in token_ids)

    def new_pool(self, num_blocks: int, block_size: int) -> KVPool:
        return KVPool(1, 1, 1, num_blocks, block_size)

    def _script_of(self, ids: list[int]) -> tuple[tuple[int, ...], list[int]]:
        found = [p for p in self.scripts if len(p) <= len(ids) and tuple(ids[:len(p)]) == p]
        if found:
            prompt = max(found, key=len)                  # the longest scripted prompt that starts ids
            return prompt, self.scripts[prompt]
        raise ScriptedModelError(f"no script starts with {ids[:8]!r}...; scripted prompts: {list(self.scripts)}.")

    def forward_batch(self, token_ids, caches) -> torch.Tensor:
        rows = check_rows(token_ids, caches, self.vocab_size, self.max_context)
        plan = []
        for ids, cache in zip(rows, caches):
            prompt, script = self._script_of(ids)
            step = len(ids) - len(prompt)
            if self.raise_at.get(prompt) == step:
                raise ScriptedModelError(f"injected failure for prompt {list(prompt)} at step {step}.")
            if step >= len(script):
                raise ScriptedModelError(f"the script of prompt {list(prompt)} has {len(script)} steps; "
                                         f"asked for step {step}. Did the engine miss a stop condition?")
            plan.append((prompt, script, step, cache.length, len(ids) - cache.length))
        self.calls.append([(prompt, past, new) for prompt, _, _, past, new in plan])
        out = torch.zeros(len(rows), self.vocab_size)                     # (B, V)
        for i, (prompt, script, step, past, new) in enumerate(plan):
            zeros = torch.zeros(1, 1, new, 1)
            caches[i].append(0, zeros, zeros)                             # the cache grows as for real
            if isinstance(script, torch.Tensor):
                out[i] = script[step]
            else:
                out[i, script[step]] = self.margin
                out[i, (script[step] + 1) % self.vocab_size] += self.margin / 2
            if self.nan_at.get(prompt) == step:
                out[i] = math.nan
        return out

    def __repr__(self) -> str:
        return f"ScriptedBatchedModel(vocab_size={self.vocab_size}, scripts={len(self.scripts)})"


class SimulatedCost:
    """Wrap a batched model so each forward costs, on `clock`,

        fixed + per_token * tokens fed + per_cached_token * tokens already in the caches

    A cost model of a GPU step: a fixed price for reading the weights once, a price per
    token fed (its arithmetic), and a price per cached token (reading its keys and values
    for attention, which is why TPOT grows with the context). With a FakeClock,
    throughput and latency become exact numbers. `tokens_per_call` records how many
    tokens each forward fed.
    """

    def __init__(self, model, clock, fixed: float, per_token: float, per_cached_token: float = 0.0) -> None:
        if not callable(getattr(model, "forward_batch", None)):
            raise ValueError(f"`model` must have forward_batch (see as_batched), got {type(model).__name__}.")
        if not callable(getattr(clock, "advance", None)):
            raise ValueError(f"`clock` must be a course.FakeClock (with advance), got {type(clock).__name__}.")
        self.model, self.clock = model, clock
        self.fixed = check_number("fixed", fixed, 0)
        self.per_token = check_number("per_token", per_token, 0)
        self.per_cached_token = check_number("per_cached_token", per_cached_token, 0)
        self.tokens_per_call: list[int] = []

    def __getattr__(self, name):            # vocab_size, eos_token_id, decode, new_pool, ...
        return getattr(self.model, name)

    def forward_batch(self, token_ids, caches) -> torch.Tensor:
        rows = isinstance(token_ids, (list, tuple)) and isinstance(caches, (list, tuple))
        cached = sum(c.length for c in caches) if rows else 0
        fed = sum(len(ids) - c.length for ids, c in zip(token_ids, caches)) if rows else 0
        out = self.model.forward_batch(token_ids, caches)
        self.tokens_per_call.append(fed)
        self.clock.advance(self.fixed + self.per_token * fed + self.per_cached_token * cached)
        return out


def as_batched(model):
    """A CourseDecoder becomes a BatchedDecoder; a model with forward_batch is used as it is."""
    if isinstance(model, CourseDecoder):
        return BatchedDecoder(model)
    if callable(getattr(model, "forward_batch", None)) and callable(getattr(model, "new_pool", None)):
        return model
    raise ValueError("`model` must be a course.decoder.CourseDecoder or a batched model with forward_batch and "
                     f"new_pool, got {type(model).__name__}.")


@torch.no_grad()
def solo_greedy(model, prompt_ids, max_tokens: int, eos_token_id: int | None = None,
                block_size: int = 16) -> tuple[list[int], list[torch.Tensor]]:
    """The request alone: greedy tokens (stopping after EOS or max_tokens) and the
    logits (V,) that chose each one. What a batched run must reproduce, row by row."""
    model = as_batched(model)
    check_int("max_tokens", max_tokens, 1)
    ids = list(prompt_ids)
    pool = model.new_pool(-(-(len(ids) + max_tokens) // block_size), block_size)
    cache = PagedKVCache(pool)
    tokens, logits = [], []
    try:
        for _ in range(max_tokens):
            row = model.forward_batch([ids + tokens], [cache])[0]
            logits.append(row.detach().cpu().clone())
            tokens.append(int(torch.argmax(row)))
            if tokens[-1] == eos_token_id:
                break
    finally:
        cache.release()
    return tokens, logits

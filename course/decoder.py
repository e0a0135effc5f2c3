"""A readable decoder-only transformer (GPT-2), with prefill and decode spelled out.

    decoder = CourseDecoder.from_pretrained(TINY_MODEL_DIR)   # the same weights as transformers
    logits, kv = decoder.prefill(input_ids)       # (B, T) -> (B, T, V), cache holding T tokens
    logits, kv = decoder.decode(next_ids, kv)     # (B, 1) -> (B, 1, V), cache holding T + 1
    logits = decoder(input_ids)                   # no cache: every position, from scratch

Prefill runs the whole prompt through the network at once (parallel over
tokens); decode feeds only the new token(s) and attends over the cached keys and
values of everything before. Same math, same logits; very different cost.

The code follows nanoGPT's model.py. GPT-2 checkpoints store their linear layers
as Conv1D, whose weight is the transpose of nn.Linear's; from_pretrained
transposes them. Shapes: B batch, T tokens attended over, t new tokens, C width
(n_embd), H heads, D head size (C // H), V vocabulary.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._checks import check_int, is_int
from .kv_cache import KVCache, KVCacheSpec


@dataclass(frozen=True)
class DecoderConfig:
    vocab_size: int
    n_positions: int = 1024   # the longest context the position table covers
    n_embd: int = 128
    n_layer: int = 4
    n_head: int = 4
    layer_norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        for name in ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head"):
            check_int(name, getattr(self, name), 1)
        if self.n_embd % self.n_head:
            raise ValueError(f"`n_embd` must be divisible by n_head={self.n_head}, got {self.n_embd}.")

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


def new_gelu(x: torch.Tensor) -> torch.Tensor:
    """GPT-2's GELU, transformers' "gelu_new":
        0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))
    computed by one fused op instead of eight (it runs once per layer per token)."""
    return F.gelu(x, approximate="tanh")


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)   # q, k, v for all heads at once
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)

    def forward(self, x, layer, kv, mask):
        B, t, C = x.shape                                         # (B, t, C)
        q, k, v = self.c_attn(x).split(C, dim=2)                  # 3 x (B, t, C)
        q = q.view(B, t, self.n_head, C // self.n_head).transpose(1, 2)   # (B, H, t, D)
        k = k.view(B, t, self.n_head, C // self.n_head).transpose(1, 2)   # (B, H, t, D)
        v = v.view(B, t, self.n_head, C // self.n_head).transpose(1, 2)   # (B, H, t, D)
        if kv is not None:
            k, v = kv.append(layer, k, v)                         # (B, H, T, D): past + new
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))    # (B, H, t, T)
        if mask is not None:
            # finfo.min, not -inf: a row with every key masked (a left-pad query)
            # becomes uniform instead of NaN; its output is ignored anyway.
            att = att.masked_fill(~mask, torch.finfo(att.dtype).min)
        att = F.softmax(att, dim=-1)
        y = att @ v                                               # (B, H, t, D)
        y = y.transpose(1, 2).contiguous().view(B, t, C)          # (B, t, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x):
        return self.c_proj(new_gelu(self.c_fc(x)))               # (B, t, C)


class Block(nn.Module):
    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_eps)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, layer, kv, mask):
        x = x + self.attn(self.ln_1(x), layer, kv, mask)         # (B, t, C)
        return x + self.mlp(self.ln_2(x))                         # (B, t, C)


class CourseDecoder(nn.Module):
    """GPT-2 with explicit prefill/decode and a pluggable KV cache.

    cache_factory: called as cache_factory(spec: KVCacheSpec) whenever a cache is
        needed; default KVCache.from_spec. Pass StaticKVCache.from_spec, or a
        student's class, to change how keys and values are stored.
    """

    def __init__(self, config: DecoderConfig,
                 cache_factory: Callable[[KVCacheSpec], object] | None = None) -> None:
        super().__init__()
        if not isinstance(config, DecoderConfig):
            raise ValueError(f"`config` must be a DecoderConfig, got {type(config).__name__}.")
        if cache_factory is not None and not callable(cache_factory):
            raise ValueError(f"`cache_factory` must be None or callable, got {type(cache_factory).__name__}.")
        self.config = config
        self.cache_factory = cache_factory or KVCache.from_spec
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)    # token embeddings
        self.wpe = nn.Embedding(config.n_positions, config.n_embd)   # position embeddings
        self.h = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_eps)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight   # tied, as in GPT-2
        self.eval()

    # ------------------------------------------------------------ loading

    @classmethod
    def from_pretrained(cls, path_or_hf_model, device: str | torch.device | None = None,
                        cache_factory: Callable[[KVCacheSpec], object] | None = None) -> "CourseDecoder":
        """Copy the weights of a GPT-2 checkpoint: a local folder (loaded with
        transformers, local files only) or a GPT2LMHeadModel already in memory.
        `device` defaults to the device of the source weights."""
        from transformers import GPT2LMHeadModel

        if isinstance(path_or_hf_model, (str, bytes)) or hasattr(path_or_hf_model, "__fspath__"):
            hf = GPT2LMHeadModel.from_pretrained(path_or_hf_model, local_files_only=True)
        elif isinstance(path_or_hf_model, GPT2LMHeadModel):
            hf = path_or_hf_model
        else:
            raise ValueError("`path_or_hf_model` must be a folder path or a transformers GPT2LMHeadModel, "
                             f"got {type(path_or_hf_model).__name__}.")
        source = next(hf.parameters())
        return cls._from_weights(hf.config, hf.state_dict(), device if device is not None else source.device,
                                 source.dtype, cache_factory)

    @classmethod
    def from_safetensors(cls, folder, device: str | torch.device | None = None,
                         cache_factory: Callable[[KVCacheSpec], object] | None = None) -> "CourseDecoder":
        """The same weights as from_pretrained(folder), read straight from the folder's
        config.json and model.safetensors: transformers is not imported, which saves a
        couple of seconds when a process only needs the course's decoder. `device`
        defaults to the CPU."""
        from types import SimpleNamespace

        from safetensors.torch import load_file

        folder = Path(folder)
        if not (folder / "config.json").is_file() or not (folder / "model.safetensors").is_file():
            raise ValueError(f"`folder` must hold config.json and model.safetensors, got {str(folder)!r}.")
        raw = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        if raw.get("model_type") != "gpt2":
            raise ValueError(f"`folder` must hold a GPT-2 checkpoint, got model_type {raw.get('model_type')!r}.")
        gpt2_defaults = {"n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12, "n_inner": None,
                         "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "scale_attn_weights": True,
                         "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False,
                         "tie_word_embeddings": True}
        sd = load_file(str(folder / "model.safetensors"))
        dtype = next(iter(sd.values())).dtype
        return cls._from_weights(SimpleNamespace(**{**gpt2_defaults, **raw}), sd,
                                 device if device is not None else "cpu", dtype, cache_factory)

    @classmethod
    def _from_weights(cls, c, state_dict, device, dtype, cache_factory) -> "CourseDecoder":
        """A GPT-2 config (attributes as transformers names them) and state dict -> CourseDecoder."""
        unsupported = {"activation_function": (c.activation_function, "gelu_new"),
                       "scale_attn_weights": (c.scale_attn_weights, True),
                       "scale_attn_by_inverse_layer_idx": (c.scale_attn_by_inverse_layer_idx, False),
                       "reorder_and_upcast_attn": (c.reorder_and_upcast_attn, False),
                       "n_inner": (c.n_inner if c.n_inner is not None else 4 * c.n_embd, 4 * c.n_embd)}
        for name, (got, want) in unsupported.items():
            if got != want:
                raise ValueError(f"`{name}` must be {want!r} for CourseDecoder, got {got!r}.")
        config = DecoderConfig(vocab_size=c.vocab_size, n_positions=c.n_positions, n_embd=c.n_embd,
                               n_layer=c.n_layer, n_head=c.n_head, layer_norm_eps=c.layer_norm_epsilon)
        sd = {k.removeprefix("transformer."): v for k, v in state_dict.items()}
        model = cls(config, cache_factory=cache_factory)
        conv1d = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
        with torch.no_grad():
            for name, p in model.named_parameters():   # the tied lm_head is listed once, as wte
                src = sd[name]
                if name.endswith(conv1d):
                    src = src.t()                      # Conv1D (in, out) -> Linear (out, in)
                if src.shape != p.shape:
                    raise ValueError(f"weight `{name}` must have shape {tuple(p.shape)}, got {tuple(src.shape)}.")
                p.copy_(src)
            if not c.tie_word_embeddings:              # an untied head gets its own weights
                model.lm_head.weight = nn.Parameter(sd["lm_head.weight"].clone())
        return model.to(device=device, dtype=dtype).eval()

    @property
    def device(self) -> torch.device:
        return self.wte.weight.device

    # ------------------------------------------------------------ checks

    def _check_ids(self, name: str, ids, past: int = 0) -> torch.Tensor:
        if not isinstance(ids, torch.Tensor) or ids.dim() != 2:
            got = f"shape {tuple(ids.shape)}" if isinstance(ids, torch.Tensor) else type(ids).__name__
            raise ValueError(f"`{name}` must be a 2-D tensor (batch, tokens), got {got}.")
        if ids.dtype in (torch.bool,) or ids.dtype.is_floating_point or ids.dtype.is_complex:
            raise ValueError(f"`{name}` must hold integer token ids, got dtype {ids.dtype}.")
        if ids.shape[0] < 1 or ids.shape[1] < 1:
            raise ValueError(f"`{name}` must have at least one row and one token, got shape {tuple(ids.shape)}.")
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= self.config.vocab_size:
            bad = lo if lo < 0 else hi
            raise ValueError(f"`{name}` must hold ids in [0, {self.config.vocab_size}), got {bad}.")
        if past + ids.shape[1] > self.config.n_positions:
            raise ValueError(f"`{name}` would make the context {past} + {ids.shape[1]} tokens, more than "
                             f"n_positions={self.config.n_positions}.")
        return ids.to(self.device, torch.long)

    def _check_mask(self, attention_mask, batch: int, total: int):
        if attention_mask is None:
            return None
        if not isinstance(attention_mask, torch.Tensor) or tuple(attention_mask.shape) != (batch, total):
            got = tuple(attention_mask.shape) if isinstance(attention_mask, torch.Tensor) else type(attention_mask).__name__
            raise ValueError(f"`attention_mask` must be a (batch, past + new) = ({batch}, {total}) tensor of 0/1, "
                             f"got {got}.")
        mask = attention_mask.to(self.device).bool()
        if not bool(mask[:, -1].all()):
            raise ValueError("`attention_mask` must be 1 at the last position of every row (pad on the left), "
                             f"got {attention_mask[:, -1].tolist()}.")
        return mask

    def new_cache(self, batch: int, max_len: int | None = None):
        """A fresh cache from cache_factory for `batch` rows and up to `max_len` tokens."""
        c = self.config
        max_len = c.n_positions if max_len is None else max_len
        check_int("batch", batch, 1)
        if not is_int(max_len) or not 1 <= max_len <= c.n_positions:
            raise ValueError(f"`max_len` must be an integer in [1, {c.n_positions}], got {max_len!r}.")
        return self.cache_factory(KVCacheSpec(n_layer=c.n_layer, batch=batch, n_head=c.n_head,
                                              head_dim=c.head_dim, max_len=max_len,
                                              dtype=self.wte.weight.dtype, device=self.device))

    # ------------------------------------------------------------ the network

    def _run(self, ids, kv, mask):
        """ids (B, t) new tokens, kv None or a cache holding `past` tokens, mask None
        or (B, past + t) bool (False = padding). Returns logits (B, t, V)."""
        B, t = ids.shape
        past = kv.length if kv is not None else 0
        T = past + t
        if mask is None:
            pos = torch.arange(past, T, device=ids.device).unsqueeze(0)      # (1, t)
        else:
            # Left padding: a row's first real token is position 0, as in transformers' generate.
            pos = (mask.long().cumsum(-1) - 1).clamp(min=0)[:, past:]        # (B, t)
        x = self.wte(ids) + self.wpe(pos)                                    # (B, t, C)
        allowed = None
        if t > 1:   # query i (absolute position past + i) may see keys 0 .. past + i
            allowed = torch.ones(t, T, dtype=torch.bool, device=ids.device).tril(diagonal=past)  # (t, T)
        if mask is not None:
            pad = mask[:, None, None, :]                                     # (B, 1, 1, T)
            allowed = pad if allowed is None else allowed & pad              # (B, 1, t, T)
        for layer, block in enumerate(self.h):
            x = block(x, layer, kv, allowed)                                 # (B, t, C)
        return self.lm_head(self.ln_f(x))                                    # (B, t, V)

    @torch.no_grad()
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """No cache: logits (B, T, V) for every position of input_ids (B, T)."""
        ids = self._check_ids("input_ids", input_ids)
        return self._run(ids, None, self._check_mask(attention_mask, *ids.shape))

    @torch.no_grad()
    def prefill(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, kv=None):
        """Run the prompt input_ids (B, T) through the network and fill a cache.

        Returns (logits (B, T, V) for every position, kv holding T tokens). `kv`
        defaults to a new cache from cache_factory; attention_mask (B, T) marks
        left padding with 0.
        """
        ids = self._check_ids("input_ids", input_ids)
        if kv is None:
            kv = self.new_cache(ids.shape[0])
        elif kv.length != 0:
            raise ValueError(f"`kv` must be an empty cache for prefill, got one holding {kv.length} tokens.")
        logits = self._run(ids, kv, self._check_mask(attention_mask, *ids.shape))
        return logits, kv

    @torch.no_grad()
    def decode(self, token_ids: torch.Tensor, kv, attention_mask: torch.Tensor | None = None):
        """Feed the new token(s) token_ids (B, t), usually t = 1, after what `kv` holds.

        Returns (logits (B, t, V), kv now holding t more tokens). The same cache
        object is updated and returned. With left padding, pass the mask of past
        and new tokens, (B, kv.length + t).
        """
        if kv is None or not hasattr(kv, "append") or not hasattr(kv, "length"):
            raise ValueError(f"`kv` must be the cache returned by prefill or decode, got {type(kv).__name__}.")
        if kv.length < 1:
            raise ValueError(f"`kv` must hold the prompt (prefill first), got a cache holding {kv.length} tokens.")
        ids = self._check_ids("token_ids", token_ids, past=kv.length)
        mask = self._check_mask(attention_mask, ids.shape[0], kv.length + ids.shape[1])
        return self._run(ids, kv, mask), kv

    # ------------------------------------------------------------ generation

    @torch.no_grad()
    def generate_greedy(self, input_ids: torch.Tensor, max_new_tokens: int, eos_token_id: int | None = None,
                        use_cache: bool = True, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Greedy (argmax) generation, like transformers' generate(do_sample=False).

        Returns the prompt followed by the new tokens, (B, T + n) with n <= max_new_tokens.
        A row that produced eos_token_id keeps receiving it while other rows go on;
        generation stops when every row has. use_cache=False recomputes the whole
        sequence at every step (same tokens, more work).
        """
        ids = self._check_ids("input_ids", input_ids)
        check_int("max_new_tokens", max_new_tokens, 1)
        if eos_token_id is not None and (not is_int(eos_token_id) or not 0 <= eos_token_id < self.config.vocab_size):
            raise ValueError(f"`eos_token_id` must be None or an integer in [0, {self.config.vocab_size}), "
                             f"got {eos_token_id!r}.")
        if not isinstance(use_cache, bool):
            raise ValueError(f"`use_cache` must be a bool, got {use_cache!r}.")
        B, T = ids.shape
        if T + max_new_tokens > self.config.n_positions:
            raise ValueError(f"`max_new_tokens` must be <= n_positions - prompt length = "
                             f"{self.config.n_positions - T}, got {max_new_tokens}.")
        mask = self._check_mask(attention_mask, B, T)
        finished = torch.zeros(B, dtype=torch.bool, device=ids.device)       # (B,)
        kv = None
        if use_cache:
            kv = self.new_cache(B, max_len=T + max_new_tokens)
            logits = self._run(ids, kv, mask)                                # (B, T, V)
        else:
            logits = self._run(ids, None, mask)
        for step in range(max_new_tokens):
            next_ids = logits[:, -1, :].argmax(dim=-1)                       # (B,)
            if eos_token_id is not None:
                next_ids = next_ids.masked_fill(finished, eos_token_id)
                finished = finished | (next_ids == eos_token_id)
            ids = torch.cat([ids, next_ids[:, None]], dim=1)                 # (B, T + step + 1)
            if mask is not None:
                mask = torch.cat([mask, mask.new_ones(B, 1)], dim=1)
            if step == max_new_tokens - 1 or (eos_token_id is not None and bool(finished.all())):
                break
            if use_cache:
                logits = self._run(ids[:, -1:], kv, mask)                    # (B, 1, V)
            else:
                logits = self._run(ids, None, mask)                          # (B, T + step + 1, V)
        if kv is not None:
            kv.release()
        return ids

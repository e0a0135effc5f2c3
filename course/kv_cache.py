"""The KV cache: what a decoder remembers so each new token costs one token of work.

During prefill every attention layer computes keys and values for the whole
prompt; during decode it computes them for the new token only and attends over
everything cached so far. The cache is an object with one small interface, so a
lab can swap in a student's own class:

    cache.append(layer, k, v) -> (k_all, v_all)
        k, v:          (B, H, t, D)  keys/values of the t new tokens at `layer`
        k_all, v_all:  (B, H, T, D)  everything that layer holds now, oldest first
    cache.length -> int              tokens every layer holds = position of the next token
    cache.bytes_allocated() -> int   bytes of key/value storage the cache holds now
    cache.release() -> None          drop the storage (length becomes 0)

The decoder reads `length` before a forward pass (to place the new tokens) and
calls `append` once per layer, in layer order. It builds caches through a factory,
`factory(spec: KVCacheSpec) -> cache`; `KVCache.from_spec` and
`StaticKVCache.from_spec` are the two shipped here.

Memory per token, for keys and values of every layer:

    kv_bytes_per_token = 2 * n_layer * n_kv_heads * head_dim * dtype_bytes

n_kv_heads counts key/value heads, not query heads: equal to n_head for
multi-head attention (GPT-2), fewer with grouped-query attention (Llama-3-8B:
8 of 32), one with multi-query attention. A sliding window and multi-head latent
attention break the formula (course/paged_kv.py says how).

The formula is Lab 05's first exercise, so its code lives in course/paged_kv.py (hidden
while Lab 05 is graded); `kv_cache.kv_bytes_per_token` is that same function, looked up
when it is first asked for, so this module (which every decoder imports) holds no answer.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ._checks import check_int, is_int


def __getattr__(name: str):
    """`kv_bytes_per_token`: course.paged_kv's (Lab 05's answer module, imported only now)."""
    if name == "kv_bytes_per_token":
        from .paged_kv import kv_bytes_per_token
        return kv_bytes_per_token
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class KVCacheSpec:
    """What a cache factory is told: the model's shape and the most tokens it will hold."""
    n_layer: int
    batch: int
    n_head: int
    head_dim: int
    max_len: int
    dtype: torch.dtype
    device: torch.device


class KVCacheFullError(RuntimeError):
    """A StaticKVCache was asked to hold more tokens than it allocated."""


def _check_kv(k, v) -> None:
    for name, x in (("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor) or x.dim() != 4:
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"`{name}` must be a 4-D tensor (B, H, t, D), got {got}.")
    if k.shape != v.shape:
        raise ValueError(f"`v` must have the shape of `k` {tuple(k.shape)}, got {tuple(v.shape)}.")


class KVCache:
    """A cache that grows: each append concatenates the new keys/values on the
    time axis. Simple, and holds exactly the tokens seen; the price is a copy of
    the whole layer's cache at every step (which grows with the context)."""

    def __init__(self, n_layer: int, device: str | torch.device = "cpu") -> None:
        check_int("n_layer", n_layer, 1)
        self.n_layer = n_layer
        self.device = torch.device(device)
        self.k: list[torch.Tensor | None] = [None] * n_layer   # per layer (B, H, T, D)
        self.v: list[torch.Tensor | None] = [None] * n_layer

    @classmethod
    def from_spec(cls, spec: KVCacheSpec) -> "KVCache":
        return cls(spec.n_layer, spec.device)

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add the t new tokens' k, v (B, H, t, D) at `layer`; return (B, H, T, D) all of them."""
        if not (is_int(layer) and 0 <= layer < self.n_layer):
            raise ValueError(f"`layer` must be an integer in [0, {self.n_layer}), got {layer!r}.")
        _check_kv(k, v)
        if k.device.type != self.device.type:
            raise ValueError(f"`k` must be on the cache's device {self.device}, got {k.device}.")
        if self.k[layer] is None:
            self.k[layer], self.v[layer] = k, v
        else:
            old = self.k[layer]
            if k.shape[:2] != old.shape[:2] or k.shape[3] != old.shape[3] or k.dtype != old.dtype:
                raise ValueError(f"`k` must be (B, H, t, D) = ({old.shape[0]}, {old.shape[1]}, t, {old.shape[3]}) "
                                 f"{old.dtype} like the cached keys, got {tuple(k.shape)} {k.dtype}.")
            self.k[layer] = torch.cat([old, k], dim=2)            # (B, H, T, D)
            self.v[layer] = torch.cat([self.v[layer], v], dim=2)  # (B, H, T, D)
        return self.k[layer], self.v[layer]

    def layer_length(self, layer: int) -> int:
        return 0 if self.k[layer] is None else self.k[layer].shape[2]

    @property
    def length(self) -> int:
        """Tokens that every layer holds (mid-forward, the last layer lags behind)."""
        return min(self.layer_length(i) for i in range(self.n_layer))

    def bytes_allocated(self) -> int:
        return sum(x.numel() * x.element_size() for x in self.k + self.v if x is not None)

    def release(self) -> None:
        self.k = [None] * self.n_layer
        self.v = [None] * self.n_layer

    def __repr__(self) -> str:
        return f"KVCache(n_layer={self.n_layer}, length={self.length}, device={self.device})"


class StaticKVCache:
    """A cache allocated once for `max_len` tokens, as serving engines do: append
    writes into the preallocated buffers, so appending costs the same at any
    context length (nothing old is copied; attention still reads all T keys),
    and the memory is reserved up front whether used or not.
    Appending past `max_len` raises KVCacheFullError."""

    def __init__(self, n_layer: int, batch: int, n_head: int, max_len: int, head_dim: int,
                 dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> None:
        for name, value in (("n_layer", n_layer), ("batch", batch), ("n_head", n_head),
                            ("max_len", max_len), ("head_dim", head_dim)):
            check_int(name, value, 1)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise ValueError(f"`dtype` must be a floating torch.dtype, got {dtype!r}.")
        self.n_layer, self.batch, self.n_head = n_layer, batch, n_head
        self.max_len, self.head_dim, self.dtype = max_len, head_dim, dtype
        self.device = torch.device(device)
        shape = (batch, n_head, max_len, head_dim)
        # One buffer per layer, (B, H, max_len, D), allocated now and written in place.
        self.k: list[torch.Tensor] | None = [torch.zeros(shape, dtype=dtype, device=self.device) for _ in range(n_layer)]
        self.v: list[torch.Tensor] | None = [torch.zeros(shape, dtype=dtype, device=self.device) for _ in range(n_layer)]
        self.filled = [0] * n_layer   # tokens written per layer

    @classmethod
    def from_spec(cls, spec: KVCacheSpec) -> "StaticKVCache":
        return cls(spec.n_layer, spec.batch, spec.n_head, spec.max_len, spec.head_dim, spec.dtype, spec.device)

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the t new tokens' k, v (B, H, t, D) at `layer`; return views (B, H, T, D)."""
        if self.k is None:
            raise RuntimeError("this StaticKVCache was released; make a new one.")
        if not (is_int(layer) and 0 <= layer < self.n_layer):
            raise ValueError(f"`layer` must be an integer in [0, {self.n_layer}), got {layer!r}.")
        _check_kv(k, v)
        B, H, t, D = k.shape
        if (B, H, D) != (self.batch, self.n_head, self.head_dim):
            raise ValueError(f"`k` must be (B, H, t, D) = ({self.batch}, {self.n_head}, t, {self.head_dim}), "
                             f"got {tuple(k.shape)}.")
        start = self.filled[layer]
        if start + t > self.max_len:
            raise KVCacheFullError(
                f"StaticKVCache is full: layer {layer} holds {start} of max_len={self.max_len} tokens "
                f"and cannot take {t} more; allocate a larger max_len.")
        k_buf, v_buf = self.k[layer], self.v[layer]                 # (B, H, max_len, D)
        k_buf.narrow(2, start, t).copy_(k)
        v_buf.narrow(2, start, t).copy_(v)
        self.filled[layer] = start + t
        return k_buf.narrow(2, 0, start + t), v_buf.narrow(2, 0, start + t)   # (B, H, T, D) views

    @property
    def length(self) -> int:
        return min(self.filled)

    def bytes_allocated(self) -> int:
        """The whole preallocation (max_len tokens), however much is filled."""
        if self.k is None:
            return 0
        return sum(x.numel() * x.element_size() for x in self.k + self.v)

    def release(self) -> None:
        self.k = self.v = None
        self.filled = [0] * self.n_layer

    def __repr__(self) -> str:
        return (f"StaticKVCache(n_layer={self.n_layer}, batch={self.batch}, length={self.length}, "
                f"max_len={self.max_len}, device={self.device})")

"""Attention blocks. Legend: B batch, T query length, S key length, H heads, D d_model.

Every block has the same call: ``block(x, memory=None, *, key_padding_mask=None, cache=None,
positional=None, offset=0)`` with x (B, T, D) queries, memory (B, S, D) for cross-attention (None
for self-attention), key_padding_mask (B, S) True at padding, a per-layer ``cache`` dict for
incremental decoding and the positional scheme whose ``rotate``/``attn_bias`` hooks apply to
self-attention. Causality is fixed at construction (decoder self-attention).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from .positional import Positional
from .registry import ATTENTION
from .spec_base import ComponentSpec


def scaled_dot_product(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, dropout: float, *,
    is_causal: bool = False, need_weights: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """softmax(QKᵀ/√d_k)V (§3.2.1, Eq. 1); mask: bool (True = attend) or additive, broadcast to (B,H,T,S).

    Uses the fused kernel unless the weights are asked for (attention maps).
    """
    if not need_weights:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=is_causal), None
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, T, S), scaled by 1/√d_k (§3.2.1)
    if is_causal:
        mask = causal_mask(q.size(-2), k.size(-2), 0, q.device)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    weights = scores.softmax(-1)
    return F.dropout(weights, dropout) @ v, weights


def causal_mask(q_len: int, k_len: int, offset: int, device: torch.device) -> torch.Tensor:
    """(T, S) bool: query i (at position offset+i) may see keys 0..offset+i (§3.2.3)."""
    i = torch.arange(offset, offset + q_len, device=device)[:, None]
    return torch.arange(k_len, device=device)[None, :] <= i


def merge_masks(
    padding: torch.Tensor | None, causal: torch.Tensor | None, bias: torch.Tensor | None, dtype: torch.dtype
) -> torch.Tensor | None:
    """Combine key padding (B, S), causal (T, S) and an additive (H, T, S) bias into one mask."""
    allowed = None
    if padding is not None:
        allowed = ~padding[:, None, None, :]  # (B, 1, 1, S)
    if causal is not None:
        allowed = causal if allowed is None else allowed & causal
    if bias is None:
        return allowed
    bias = bias.to(dtype)
    if allowed is None:
        return bias
    return bias.masked_fill(~allowed, float("-inf"))


class MultiHeadSpec(ComponentSpec):
    """Multi-head scaled dot-product attention (§3.2.1 Eq. 1, §3.2.2); kv_heads < heads shares
    each key/value head among heads/kv_heads query heads (grouped-query; 1 = multi-query)."""

    kind: Literal["multihead"] = "multihead"
    bias: bool = Field(True, description="Biases on the Q/K/V/output projections (as the authors' code).")
    kv_heads: int | None = Field(None, gt=0, description="Key/value heads; must divide heads. Default: heads.")


class AttentionBlock(nn.Module):
    """Shared projections and caching; subclasses define ``attend``."""

    def __init__(self, *, d_model: int, heads: int, d_k: int, d_v: int, kv_heads: int, bias: bool,
                 dropout: float, causal: bool) -> None:
        super().__init__()
        if heads % kv_heads:
            raise ValueError(f"kv_heads ({kv_heads}) must divide heads ({heads})")
        self.heads, self.kv_heads, self.d_k, self.d_v = heads, kv_heads, d_k, d_v
        self.causal, self.dropout = causal, dropout
        self.w_q = nn.Linear(d_model, heads * d_k, bias=bias)  # W^Q_i stacked over heads (§3.2.2)
        self.w_k = nn.Linear(d_model, kv_heads * d_k, bias=bias)
        self.w_v = nn.Linear(d_model, kv_heads * d_v, bias=bias)
        self.w_o = nn.Linear(heads * d_v, d_model, bias=bias)  # W^O (§3.2.2)
        self.need_weights = False  # set by attention-map tools; then last_weights holds (B,H,T,S)
        self.last_weights: torch.Tensor | None = None

    def _split(self, x: torch.Tensor, heads: int) -> torch.Tensor:
        return x.unflatten(-1, (heads, -1)).transpose(1, 2)  # (B, T, H*d) -> (B, H, T, d)

    def _keys_values(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self._split(self.w_k(src), self.kv_heads), self._split(self.w_v(src), self.kv_heads)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None, *,
                key_padding_mask: torch.Tensor | None = None, cache: dict | None = None,
                positional: Positional | None = None, offset: int = 0) -> torch.Tensor:
        q = self._split(self.w_q(x), self.heads)  # (B, H, T, d_k)
        if memory is not None:  # cross-attention: keys/values from the encoder, computed once per sentence
            if cache is not None and "k" in cache:
                k, v = cache["k"], cache["v"]
            else:
                k, v = self._keys_values(memory)
                if cache is not None:
                    cache["k"], cache["v"] = k, v
            positional = None
        else:
            k, v = self._keys_values(x)  # (B, Hkv, T, d)
            if positional is not None:
                q, k = positional.rotate(q, offset), positional.rotate(k, offset)
            if cache is not None:  # self-attention: append this step's keys/values
                if "k" in cache:
                    k, v = torch.cat([cache["k"], k], 2), torch.cat([cache["v"], v], 2)
                cache["k"], cache["v"] = k, v
        out = self.attend(q, k, v, key_padding_mask, positional, offset)  # (B, H, T, d_v)
        return self.w_o(out.transpose(1, 2).flatten(2))  # concat heads, project (§3.2.2)

    def attend(self, q, k, v, key_padding_mask, positional, offset) -> torch.Tensor:  # noqa: ANN001
        raise NotImplementedError


@ATTENTION.register(MultiHeadSpec)
class MultiHeadAttention(AttentionBlock):
    def __init__(self, spec: MultiHeadSpec, *, d_model: int, heads: int, d_k: int, d_v: int,
                 dropout: float, causal: bool) -> None:
        super().__init__(d_model=d_model, heads=heads, d_k=d_k, d_v=d_v, kv_heads=spec.kv_heads or heads,
                         bias=spec.bias, dropout=dropout, causal=causal)

    def attend(self, q, k, v, key_padding_mask, positional, offset) -> torch.Tensor:  # noqa: ANN001
        if self.kv_heads != self.heads:  # grouped-query: each K/V head serves heads/kv_heads query heads
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        t, s = q.size(-2), k.size(-2)
        bias = positional.attn_bias(self.heads, t, s, offset) if positional is not None else None
        bias = bias.to(q.device) if bias is not None else None
        # Fast path: plain causal self-attention over a whole sequence uses the fused causal kernel.
        fused_causal = self.causal and key_padding_mask is None and bias is None and offset == 0 and t == s
        causal = causal_mask(t, s, offset, q.device) if self.causal and not fused_causal and t > 1 else None
        mask = merge_masks(key_padding_mask, causal, bias, q.dtype)
        dropout = self.dropout if self.training else 0.0
        out, weights = scaled_dot_product(q, k, v, mask, dropout, is_causal=fused_causal,
                                          need_weights=self.need_weights)
        self.last_weights = weights
        return out

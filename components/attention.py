"""Attention blocks. Legend: B batch, T query length, S key length, H heads, Hkv key/value heads,
D d_model, d_k/d_v per-head query-key/value sizes, R relative-position buckets.

Every block has the same call: ``block(x, memory=None, *, key_padding_mask=None, cache=None,
positional=None, offset=0, beams=1)`` with x (B·beams, T, D) queries, memory (B, S, D) for
cross-attention (None for self-attention), key_padding_mask (B, S) True at padding (or (B, 1, T, S) True
where a query may not see a key: a prefix LM's mask, components/decoder_only.py), a per-layer
``cache`` dict for incremental decoding, the positional scheme whose ``rotate``/``attn_bias`` hooks
apply to self-attention, and ``beams`` query rows sharing each memory row. Causality is fixed at
construction (decoder self-attention). Queries sit at absolute positions offset..offset+T-1 and keys
at 0..S-1 (the cache holds every earlier key). ``block.attention_weights(...)`` (same arguments, no
cache) returns the weights (B·beams, H, T, S) without changing any state.

Variants: ``multihead`` (§3.2.2, with grouped-/multi-query ``kv_heads``), ``local`` (restricted
self-attention, §4), ``additive`` (Bahdanau et al. 2015, the comparison point of §3.2.1) and
``relative`` (Shaw et al. 2018). ``local`` and ``relative`` are self-attention only.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .kv_cache import KVBuffer
from .positional import Positional
from .registry import ATTENTION
from .specs.attention import AdditiveSpec, LocalSpec, MultiHeadSpec, RelativeSpec

__all__ = ["AdditiveAttention", "AdditiveSpec", "AttentionBlock", "LocalAttention", "LocalSpec", "MultiHeadAttention",
           "MultiHeadSpec", "RelativeAttention", "RelativeSpec"]


FEW_QUERIES = 16  # up to this many queries, plain matmuls beat PyTorch's fused kernel on CPU


def scaled_dot_product(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, dropout: float, *,
    is_causal: bool = False, need_weights: bool = False, scaled: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """softmax(QKᵀ/√d_k)V (§3.2.1, Eq. 1); mask: bool (True = attend) or additive, broadcast to (B,H,T,S).
    ``scaled`` false: softmax(QKᵀ)V (T5's).

    Uses the fused kernel unless the weights are asked for (attention maps), for a few queries (an
    incremental decoding step, where plain matmuls are faster on CPU), or for bfloat16 on CPU, where
    PyTorch's fused kernel is slower than plain bf16 matmuls (both measured: docs/benchmarks.md).
    """
    cpu_bf16 = q.dtype == torch.bfloat16 and q.device.type == "cpu"
    few = FEW_QUERIES if q.device.type == "cpu" else 1  # measured on CPU only
    fused = not need_weights and not cpu_bf16 and q.size(-2) > few
    if fused:
        # A branch, not the value: under torch.compile with dynamic shapes is_causal may be a symbolic
        # T == S, which SDPA refuses; branching on it becomes a guard.
        causal = True if is_causal else False  # noqa: SIM210
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=causal,
                                             scale=None if scaled else 1.0)
        return out, None
    scores = (q / math.sqrt(q.size(-1)) if scaled else q) @ k.transpose(-2, -1)  # (B, H, T, S), 1/√d_k (§3.2.1)
    if is_causal:
        mask = causal_mask(q.size(-2), k.size(-2), 0, q.device)
    weights = masked_softmax(scores, mask)
    return F.dropout(weights, dropout) @ v, weights if need_weights else None


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """softmax over the last dimension of (B, H, T, S) logits; mask as in ``scaled_dot_product``."""
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    return scores.softmax(-1)


def causal_mask(q_len: int, k_len: int, offset: int, device: torch.device) -> torch.Tensor:
    """(T, S) bool: query i (at position offset+i) may see keys 0..offset+i (§3.2.3)."""
    i = torch.arange(offset, offset + q_len, device=device)[:, None]
    return torch.arange(k_len, device=device)[None, :] <= i


def relative_positions(q_len: int, k_len: int, offset: int, device: torch.device) -> torch.Tensor:
    """(T, S) long: j - i for query i at absolute position offset+i and key j at position j."""
    i = torch.arange(offset, offset + q_len, device=device)[:, None]  # (T, 1)
    return torch.arange(k_len, device=device)[None, :] - i  # (T, S)


def local_mask(q_len: int, k_len: int, offset: int, window: int, causal: bool,
               device: torch.device) -> torch.Tensor:
    """(T, S) bool band of restricted self-attention (§4, Table 1): |i-j| ≤ r, or i-r ≤ j ≤ i if causal."""
    rel = relative_positions(q_len, k_len, offset, device)  # j - i
    return (rel >= -window) & (rel <= (0 if causal else window))


def merge_masks(
    padding: torch.Tensor | None, causal: torch.Tensor | None, bias: torch.Tensor | None, dtype: torch.dtype
) -> torch.Tensor | None:
    """Combine key padding (B, S) or a blocked mask (B, 1, T, S), causal (T, S) and an additive (H, T, S)
    bias into one mask."""
    allowed = None
    if padding is not None:
        allowed = ~padding if padding.dim() == 4 else ~padding[:, None, None, :]  # (B, 1, 1 or T, S)
    if causal is not None:
        allowed = causal if allowed is None else allowed & causal
    if bias is None:
        return allowed
    bias = bias.to(dtype)
    if allowed is None:
        return bias
    return bias.masked_fill(~allowed, float("-inf"))


class AttentionBlock(nn.Module):
    """Shared projections and caching; subclasses define ``attend``."""

    self_attention_only = False
    """True: calling the block with ``memory`` (cross-attention) is refused."""

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
        # self-attention's W^Q, W^K, W^V as one product (x -> [q | k | v]) where decoding set one
        # (engine/decoding/packed.py); None: three
        self.fused_qkv: nn.Module | None = None

    def _split(self, x: torch.Tensor, heads: int) -> torch.Tensor:
        return x.unflatten(-1, (heads, -1)).transpose(1, 2)  # (B, T, H*d) -> (B, H, T, d)

    def _keys_values(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self._split(self.w_k(src), self.kv_heads), self._split(self.w_v(src), self.kv_heads)

    def _expand_kv(self, t: torch.Tensor) -> torch.Tensor:
        """(B, Hkv, S, d) -> (B, H, S, d): each K/V head serves heads/kv_heads query heads (grouped-query)."""
        if self.kv_heads == self.heads:
            return t
        return t.repeat_interleave(self.heads // self.kv_heads, dim=1)

    def _bias(self, positional: Positional | None, t: int, s: int, offset: int,
              like: torch.Tensor) -> torch.Tensor | None:
        """The positional scheme's additive (H, T, S) logit bias on ``like``'s device, or None."""
        bias = positional.attn_bias(self.heads, t, s, offset) if positional is not None else None
        return bias.to(like.device) if bias is not None else None

    def _dropout_p(self) -> float:
        return self.dropout if self.training else 0.0

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None, *,
                key_padding_mask: torch.Tensor | None = None, cache: dict | None = None,
                positional: Positional | None = None, offset: int = 0, beams: int = 1) -> torch.Tensor:
        """x (B·beams, T, D), memory (B, S, D) or None -> (B·beams, T, D). ``beams``: query rows per
        memory row (cross-attention only); rows i·beams .. i·beams+beams-1 share memory row i."""
        out, _ = self._run(x, memory, key_padding_mask, cache, positional, offset, beams, need_weights=False)
        return self.w_o(out.transpose(1, 2).flatten(2))  # concat heads, project (§3.2.2)

    def attention_weights(self, x: torch.Tensor, memory: torch.Tensor | None = None, *,
                          key_padding_mask: torch.Tensor | None = None, positional: Positional | None = None,
                          offset: int = 0, beams: int = 1) -> torch.Tensor:
        """The attention weights α (B·beams, H, T, S) ``forward`` would use on the same inputs (without a
        cache, before attention dropout). Changes no state."""
        _, weights = self._run(x, memory, key_padding_mask, None, positional, offset, beams, need_weights=True)
        assert weights is not None  # every attend returns weights when asked
        return weights

    def _run(self, x: torch.Tensor, memory: torch.Tensor | None, key_padding_mask: torch.Tensor | None,
             cache: dict | None, positional: Positional | None, offset: int, beams: int,
             need_weights: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Project, attend; returns the heads' outputs (B·beams, H, T, d_v) and, if asked, the weights."""
        if memory is None and self.fused_qkv is not None:
            q, k, v = self.fused_qkv(x).split([self.heads * self.d_k, self.kv_heads * self.d_k,
                                               self.kv_heads * self.d_v], dim=-1)
            q, k, v = self._split(q, self.heads), self._split(k, self.kv_heads), self._split(v, self.kv_heads)
        else:
            q = self._split(self.w_q(x), self.heads)  # (B, H, T, d_k)
        if memory is not None:  # cross-attention: keys/values from the encoder, computed once per sentence
            if self.self_attention_only:
                raise ValueError(f"{type(self).__name__} is self-attention only; it cannot attend to memory")
            if cache is not None and "k" in cache:
                k, v = cache["k"], cache["v"]
            else:
                k, v = self._keys_values(memory)
                if cache is not None:  # contiguous once, or every step's matmul copies them (B·H not a view)
                    k, v = cache["k"], cache["v"] = k.contiguous(), v.contiguous()
            positional = None
        else:
            if beams != 1:
                raise ValueError(f"beams ({beams}) apply to cross-attention only")
            if self.fused_qkv is None:
                k, v = self._keys_values(x)  # (B, Hkv, T, d)
            if positional is not None:
                q, k = positional.rotate(q, offset), positional.rotate(k, offset)
            if cache is not None:  # self-attention: append this step's keys/values to the earlier ones
                buffer: KVBuffer = cache.setdefault("kv", KVBuffer())
                k, v = buffer.append(k, v)  # rows in the buffer's physical order (kv_cache.py)
                if buffer.inverse is not None:
                    return self._permuted(q, k, v, key_padding_mask, positional, offset, need_weights, buffer)
        # Beams share their sentence's memory row (cross-attention): memory row i serves the g query
        # rows i·g .. i·g+g-1, which attend as g·T queries of that row, so K/V are neither copied per
        # beam nor reordered as beams move, and each matmul is g times larger.
        b, t, g = k.size(0), q.size(2), beams
        if q.size(0) != b * g:
            raise ValueError(f"{q.size(0)} query rows do not match {b} memory rows × {g} beams")
        if g > 1:
            q = q.unflatten(0, (b, g)).transpose(1, 2).flatten(2, 3)  # (B, H, g·T, d_k)
        out, weights = self.attend(q, k, v, key_padding_mask, positional, offset, need_weights)  # (B, H, g·T, ·)
        if g > 1:
            out = out.unflatten(2, (g, t)).transpose(1, 2).flatten(0, 1)  # (B·g, H, T, d_v)
            if weights is not None:
                weights = weights.unflatten(2, (g, t)).transpose(1, 2).flatten(0, 1)  # (B·g, H, T, S)
        return out, weights

    def _permuted(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_padding_mask: torch.Tensor | None,
                  positional: Positional | None, offset: int, need_weights: bool, buffer: KVBuffer
                  ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Self-attention over a buffer whose rows are not in logical order: the queries (and any key
        padding) taken to the buffer's physical order, the outputs back; each row's computation as it
        would be in order."""
        assert buffer.inverse is not None and buffer.rows is not None
        to_physical, to_logical = buffer.inverse, buffer.rows
        pad = None if key_padding_mask is None else key_padding_mask.index_select(0, to_physical)
        out, weights = self.attend(q.index_select(0, to_physical), k, v, pad, positional, offset, need_weights)
        return out.index_select(0, to_logical), None if weights is None else weights.index_select(0, to_logical)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_padding_mask: torch.Tensor | None,
               positional: Positional | None, offset: int, need_weights: bool = False
               ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """q (B, H, T, d_k), k (B, Hkv, S, d_k), v (B, Hkv, S, d_v) -> the output (B, H, T, d_v) and,
        when ``need_weights``, the attention weights (B, H, T, S) before dropout (else None)."""
        raise NotImplementedError(f"{type(self).__name__} must define attend")


@ATTENTION.register(MultiHeadSpec)
class MultiHeadAttention(AttentionBlock):
    def __init__(self, spec: MultiHeadSpec, *, d_model: int, heads: int, d_k: int, d_v: int,
                 dropout: float, causal: bool) -> None:
        super().__init__(d_model=d_model, heads=heads, d_k=d_k, d_v=d_v, kv_heads=spec.kv_heads or heads,
                         bias=spec.bias, dropout=dropout, causal=causal)
        self.scaled = getattr(spec, "scaled", True)  # a plugin's subclass spec may not have the field

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_padding_mask: torch.Tensor | None,
               positional: Positional | None, offset: int, need_weights: bool = False
               ) -> tuple[torch.Tensor, torch.Tensor | None]:
        k, v = self._expand_kv(k), self._expand_kv(v)  # (B, H, S, d)
        t, s = q.size(-2), k.size(-2)
        bias = self._bias(positional, t, s, offset, q)
        # Fast path: plain causal self-attention over a whole sequence uses the fused causal kernel.
        fused_causal = self.causal and key_padding_mask is None and bias is None and offset == 0 and t == s
        causal = causal_mask(t, s, offset, q.device) if self.causal and not fused_causal and t > 1 else None
        mask = merge_masks(key_padding_mask, causal, bias, q.dtype)
        return scaled_dot_product(q, k, v, mask, self._dropout_p(), is_causal=fused_causal,
                                  need_weights=need_weights, scaled=self.scaled)


# ----------------------------------------------------------------------------- local (restricted)


@ATTENTION.register(LocalSpec)
class LocalAttention(AttentionBlock):
    self_attention_only = True

    def __init__(self, spec: LocalSpec, *, d_model: int, heads: int, d_k: int, d_v: int,
                 dropout: float, causal: bool) -> None:
        super().__init__(d_model=d_model, heads=heads, d_k=d_k, d_v=d_v, kv_heads=spec.kv_heads or heads,
                         bias=spec.bias, dropout=dropout, causal=causal)
        self.window = spec.window

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_padding_mask: torch.Tensor | None,
               positional: Positional | None, offset: int, need_weights: bool = False
               ) -> tuple[torch.Tensor, torch.Tensor | None]:
        k, v = self._expand_kv(k), self._expand_kv(v)  # (B, H, S, d)
        t, s = q.size(-2), k.size(-2)
        allowed = local_mask(t, s, offset, self.window, self.causal, q.device)  # (T, S), §4 neighbourhood r
        if key_padding_mask is not None:
            # A padded query whose whole window is padding keeps its own key, so no row is empty
            # (its output is never used); real queries are unaffected: their own key is not padding.
            own = relative_positions(t, s, offset, q.device) == 0  # (T, S)
            blocked = key_padding_mask if key_padding_mask.dim() == 4 else key_padding_mask[:, None, None, :]
            allowed = allowed & (~blocked | own)  # (B, 1, T, S)
        mask = merge_masks(None, allowed, self._bias(positional, t, s, offset, q), q.dtype)
        return scaled_dot_product(q, k, v, mask, self._dropout_p(), need_weights=need_weights)


# ----------------------------------------------------------------------------- additive (Bahdanau)


@ATTENTION.register(AdditiveSpec)
class AdditiveAttention(AttentionBlock):
    def __init__(self, spec: AdditiveSpec, *, d_model: int, heads: int, d_k: int, d_v: int,
                 dropout: float, causal: bool) -> None:
        super().__init__(d_model=d_model, heads=heads, d_k=d_k, d_v=d_v, kv_heads=heads, bias=spec.bias,
                         dropout=dropout, causal=causal)
        self.v = nn.Parameter(torch.empty(heads, d_k))  # (H, d_k): v_h, Bahdanau's v_a (App. A.1.2)
        nn.init.uniform_(self.v, -(d_k**-0.5), d_k**-0.5)  # nn.Linear(d_k, 1)'s default range

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_padding_mask: torch.Tensor | None,
               positional: Positional | None, offset: int, need_weights: bool = False
               ) -> tuple[torch.Tensor, torch.Tensor | None]:
        t, s = q.size(-2), k.size(-2)
        # tanh(W_q q_i + W_k k_j) (Bahdanau App. A.1.2): (B,H,T,1,d_k) + (B,H,1,S,d_k) -> (B,H,T,S,d_k)
        hidden = torch.tanh(q[:, :, :, None, :] + k[:, :, None, :, :])
        scores = hidden @ self.v[None, :, None, :, None]  # (B, H, T, S, 1): v_hᵀ tanh(...)
        causal = causal_mask(t, s, offset, q.device) if self.causal else None
        mask = merge_masks(key_padding_mask, causal, self._bias(positional, t, s, offset, q), q.dtype)
        weights = masked_softmax(scores.squeeze(-1), mask)  # (B, H, T, S), α_ij = softmax_j(score_ij)
        out = F.dropout(weights, self._dropout_p()) @ v  # (B, H, T, d_v): Σ_j α_ij v_j
        return out, weights if need_weights else None


# ----------------------------------------------------------------------------- relative (Shaw et al.)


@ATTENTION.register(RelativeSpec)
class RelativeAttention(AttentionBlock):
    self_attention_only = True

    def __init__(self, spec: RelativeSpec, *, d_model: int, heads: int, d_k: int, d_v: int,
                 dropout: float, causal: bool) -> None:
        super().__init__(d_model=d_model, heads=heads, d_k=d_k, d_v=d_v, kv_heads=heads, bias=spec.bias,
                         dropout=dropout, causal=causal)
        self.max_distance = spec.max_distance
        buckets = spec.buckets(causal)  # R
        self.rel_k = nn.Parameter(torch.empty(buckets, d_k))  # w^K_{-k..k} (R, d_k)
        self.rel_v = nn.Parameter(torch.empty(buckets, d_v))  # w^V_{-k..k} (R, d_v)
        nn.init.normal_(self.rel_k, std=d_k**-0.5)
        nn.init.normal_(self.rel_v, std=d_v**-0.5)

    def buckets(self, q_len: int, k_len: int, offset: int, device: torch.device) -> torch.Tensor:
        """(T, S) row of the tables for each pair: clip(j-i, -k, k) + k (Shaw et al. §3.2)."""
        k = self.max_distance
        rel = relative_positions(q_len, k_len, offset, device)  # j - i
        return rel.clamp(-k, 0 if self.causal else k) + k

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_padding_mask: torch.Tensor | None,
               positional: Positional | None, offset: int, need_weights: bool = False
               ) -> tuple[torch.Tensor, torch.Tensor | None]:
        b, h, t, _ = q.shape
        s = k.size(-2)
        idx = self.buckets(t, s, offset, q.device).expand(b, h, t, s)  # (B, H, T, S)
        # e_ij = (x_i W^Q)(x_j W^K)ᵀ + (x_i W^Q) a^Kᵀ_ij, over √d_z (Shaw et al. §3.1)
        content = q @ k.transpose(-2, -1)  # (B, H, T, S)
        position = (q @ self.rel_k.T).gather(-1, idx)  # (B, H, T, R) -> (B, H, T, S)
        scores = (content + position) / math.sqrt(self.d_k)
        causal = causal_mask(t, s, offset, q.device) if self.causal else None
        mask = merge_masks(key_padding_mask, causal, self._bias(positional, t, s, offset, q), q.dtype)
        weights = masked_softmax(scores, mask)  # α_ij (B, H, T, S)
        dropped = F.dropout(weights, self._dropout_p())
        # z_i = Σ_j α_ij x_j W^V + Σ_j α_ij a^V_ij: sum each row's weights per bucket, then mix w^V
        buckets = self.rel_v.size(0)
        per_bucket = dropped.new_zeros(b, h, t, buckets).scatter_add_(-1, idx, dropped)  # (B, H, T, R)
        out = dropped @ v + per_bucket @ self.rel_v  # (B, H, T, d_v)
        return out, weights if need_weights else None

"""Positional schemes. Three hooks, so additive tables and schemes acting inside attention share one
contract:

- ``forward(x, offset)``: (B, T, D) embeddings of positions offset..offset+T-1 -> (B, T, D);
  additive schemes add their table here, the others return ``x``.
- ``rotate(t, offset)``: (B, H, T, d_k) queries or keys -> same shape (rotary schemes).
- ``attn_bias(heads, T, S, offset)``: an additive (H, T, S) bias on attention logits, or ``None``.

Attention blocks call ``rotate`` and ``attn_bias`` for self-attention only.

A left-padded batch (a prefix LM decoding sources of different lengths, ``engine/decoding/prefix_lm.py``)
holds row b's position c - start[b] at column c: ``shifted(start)`` is the scheme for such a batch, its
hooks still called with column offsets. Schemes that read only differences of positions (none, ALiBi)
are their own shifted view; those that read absolute positions (sinusoidal, learned, RoPE) take each
row's positions (``offset`` a (B, 1) tensor: each row's first position); any other scheme (a plugin)
returns None, and its batches keep one source length.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from torch import nn

from .registry import POSITIONAL
from .specs.positional import (
    ALiBiSpec,
    BucketedSpec,
    LearnedSpec,
    NoPositionSpec,
    RopeScalingSpec,
    RotarySpec,
    SinusoidalSpec,
)

__all__ = ["ALiBi", "ALiBiSpec", "AtPositions", "Bucketed", "BucketedSpec", "Learned", "LearnedSpec", "NoPosition",
           "NoPositionSpec", "Positional",
           "Rotary", "RotarySpec", "RowShifted", "Sinusoidal", "SinusoidalSpec", "positions", "relative_bucket",
           "sinusoid_table"]

Offset = int | torch.Tensor  # the first position: one for every row, or each row's (B, 1)


class Positional(nn.Module):
    """Identity hooks; schemes override the ones they use."""

    per_head: ClassVar[bool] = False
    """True: built with its stack's ``heads`` and whether its self-attention is ``causal`` (a table per head)."""

    shift: ClassVar[str] = "none"
    """How ``shifted`` views it: "invariant" (reads only differences of positions: itself), "rows" (its
    ``forward``/``rotate`` take each row's offsets), "none" (cannot: ``shifted`` gives None)."""

    def shifted(self, start: torch.Tensor) -> Positional | None:
        """This scheme for a batch whose row b holds position c - start[b] at column c (start (B,) long:
        each row's left padding), or None where it cannot (module docstring)."""
        if self.shift == "invariant":
            return self
        return RowShifted(self, start) if self.shift == "rows" else None

    def forward(self, x: torch.Tensor, offset: Offset = 0) -> torch.Tensor:
        return x

    def rotate(self, t: torch.Tensor, offset: Offset = 0) -> torch.Tensor:
        return t

    def attn_bias(self, heads: int, q_len: int, k_len: int, offset: int = 0) -> torch.Tensor | None:
        return None

    def packed(self, pos: torch.Tensor) -> Positional | None:
        """This scheme for packed rows (``components/packing.py``): token (b, t) at position pos[b, t]; None
        where it cannot (a scheme that reads absolute positions only through one offset for the whole batch)."""
        if self.shift == "invariant":
            return self  # differences of positions within a segment are those of the sequence alone
        return AtPositions(self, pos) if self.shift == "rows" else None

    def add_at(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """``forward`` at the (B, T) positions ``pos`` (any position per token)."""
        return self(x, pos - torch.arange(x.size(1), device=pos.device))  # positions(): arange + offset = pos


def positions(offset: Offset, length: int, device: torch.device) -> torch.Tensor:
    """(T,) positions offset..offset+T-1, or (B, T) each row's for a (B, 1) ``offset``."""
    pos = torch.arange(length, device=device)
    return pos + offset if isinstance(offset, int) else pos[None, :] + offset.to(device)


class RowShifted(Positional):
    """``base`` (a "rows" scheme) for a left-padded batch: column c of row b at position c - start[b];
    padding columns (negative positions) take position 0 where the scheme has a table: they are never
    attended."""

    def __init__(self, base: Positional, start: torch.Tensor) -> None:
        super().__init__()
        self.base, self.start = base, start

    def _rows(self, offset: Offset) -> torch.Tensor:
        return (offset - self.start)[:, None]  # (B, 1): each row's position at column ``offset``

    def forward(self, x: torch.Tensor, offset: Offset = 0) -> torch.Tensor:
        return self.base(x, self._rows(offset))

    def rotate(self, t: torch.Tensor, offset: Offset = 0) -> torch.Tensor:
        return self.base.rotate(t, self._rows(offset))


class AtPositions(Positional):
    """``base`` (a "rows" scheme) for packed rows: token (b, t) at position pos[b, t], each sequence of a row
    counting from 0; rotations and tables read those positions, hooks are called with offset 0."""

    def __init__(self, base: Positional, pos: torch.Tensor) -> None:
        super().__init__()
        self.base, self.pos = base, pos

    def forward(self, x: torch.Tensor, offset: Offset = 0) -> torch.Tensor:
        return self.base.add_at(x, self.pos)

    def rotate(self, t: torch.Tensor, offset: Offset = 0) -> torch.Tensor:
        return self.base.rotate(t, self.pos - torch.arange(t.size(-2), device=self.pos.device))

    def attn_bias(self, heads: int, q_len: int, k_len: int, offset: int = 0) -> torch.Tensor | None:
        return self.base.attn_bias(heads, q_len, k_len, offset)


def sinusoid_table(length: int, d_model: int, start: int = 0) -> torch.Tensor:
    """Rows start..length-1 of PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(same)
    (§3.5). (length - start, D)."""
    pos = torch.arange(start, length, dtype=torch.float64)[:, None]  # (L, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (D/2,)
    angle = pos / torch.pow(10000.0, two_i / d_model)  # (L, D/2)
    table = torch.zeros(length - start, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)  # even dimensions: sin (§3.5)
    table[:, 1::2] = torch.cos(angle[:, : d_model // 2])  # odd dimensions: cos (§3.5)
    return table.float()


@POSITIONAL.register(SinusoidalSpec)
class Sinusoidal(Positional):
    shift = "rows"

    def __init__(self, spec: SinusoidalSpec, *, d_model: int, max_positions: int | None) -> None:
        super().__init__()
        self.d_model = d_model
        # A cache, not a parameter: recomputed on load, never saved in checkpoints.
        self.register_buffer("table", sinusoid_table(max_positions or 1024, d_model), persistent=False)

    def forward(self, x: torch.Tensor, offset: Offset = 0) -> torch.Tensor:
        if not isinstance(offset, int):  # each row's positions (a left-padded batch)
            pos = positions(offset, x.size(1), self.table.device).clamp(min=0)  # (B, T)
            end = int(pos.max()) + 1
            table = self.table if end <= self.table.size(0) else sinusoid_table(end, self.d_model).to(pos.device)
            return x + table[pos].to(x.dtype)
        end = offset + x.size(1)
        if end <= self.table.size(0):
            rows = self.table[offset:end]
        else:  # the formula extrapolates: rows past the cached table, computed for this call only
            rows = sinusoid_table(end, self.d_model, start=offset).to(self.table.device)
        return x + rows.to(x.dtype)


    def add_at(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """Rows of the cached table (the trainer keeps packed rows within it: ``table_length``), looked up
        without reading the largest position on the host."""
        return x + self.table[pos].to(x.dtype)

    @property
    def table_length(self) -> int:
        return self.table.size(0)


@POSITIONAL.register(LearnedSpec)
class Learned(Positional):
    shift = "rows"

    def __init__(self, spec: LearnedSpec, *, d_model: int, max_positions: int | None) -> None:
        super().__init__()
        assert max_positions is not None  # LearnedSpec.check guarantees it
        self.embedding = nn.Embedding(max_positions, d_model)
        nn.init.normal_(self.embedding.weight, std=d_model**-0.5)

    def forward(self, x: torch.Tensor, offset: Offset = 0) -> torch.Tensor:
        pos = None
        if isinstance(offset, int):
            end = offset + x.size(1)
        else:  # each row's positions (a left-padded batch)
            pos = positions(offset, x.size(1), self.embedding.weight.device).clamp(min=0)  # (B, T)
            end = int(pos.max()) + 1
        if end > self.embedding.num_embeddings:
            limit = self.embedding.num_embeddings
            raise ValueError(f"sequence of {end} positions exceeds max_positions {limit}")
        rows = self.embedding.weight[offset:end] if pos is None else self.embedding.weight[pos]
        return x + rows.to(x.dtype)

    def add_at(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        return x + self.embedding.weight[pos].to(x.dtype)  # within max_positions: the trainer checks

    @property
    def table_length(self) -> int:
        return self.embedding.num_embeddings


@POSITIONAL.register(NoPositionSpec)
class NoPosition(Positional):
    shift = "invariant"

    def __init__(self, spec: NoPositionSpec, *, d_model: int, max_positions: int | None) -> None:
        super().__init__()


def llama3_frequencies(theta: torch.Tensor, s: RopeScalingSpec) -> torch.Tensor:
    """``theta`` (d/2,) rescaled as ``RopeScalingSpec`` says (Llama 3.1's ``rope_type: llama3``)."""
    wavelength = 2 * math.pi / theta
    long, short = s.original_max_positions / s.low_freq_factor, s.original_max_positions / s.high_freq_factor
    smooth = (s.original_max_positions / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor)
    scaled = torch.where(wavelength > long, theta / s.factor, theta)
    between = (wavelength >= short) & (wavelength <= long)
    return torch.where(between, (1 - smooth) * theta / s.factor + smooth * theta, scaled)


@POSITIONAL.register(RotarySpec)
class Rotary(Positional):
    shift = "rows"

    def __init__(self, spec: RotarySpec, *, d_model: int, max_positions: int | None) -> None:
        super().__init__()
        self.base, self.scaling = spec.base, spec.scaling

    def rotate(self, t: torch.Tensor, offset: Offset = 0) -> torch.Tensor:
        """t (B, H, T, d_k) at positions offset.. (``offset`` (B, 1): each row's first position)."""
        d = t.size(-1)
        if d % 2:
            raise ValueError(f"rope needs an even d_k, got {d}")
        dtype = torch.promote_types(t.dtype, torch.float32)  # angles in at least fp32 (fp64 for fp64 inputs)
        inv_freq = self.base ** (-torch.arange(0, d, 2, device=t.device, dtype=dtype) / d)  # (d/2,): θ_i
        if self.scaling is not None:
            inv_freq = llama3_frequencies(inv_freq, self.scaling)
        pos = positions(offset, t.size(-2), t.device).to(dtype)  # (T,) or (B, T): m
        angle = pos[..., None] * inv_freq  # (T, d/2) or (B, T, d/2): m·θ_i
        if angle.dim() == 3:
            angle = angle[:, None]  # (B, 1, T, d/2): every head of a row alike
        cos, sin = angle.cos().to(t.dtype), angle.sin().to(t.dtype)
        x1, x2 = t[..., 0::2], t[..., 1::2]  # pairs (2i, 2i+1) rotate together
        # 2-d rotation of each pair by m·θ_i (Su et al. 2021, §3.4.2)
        out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)  # (..., T, d/2, 2)
        return out.flatten(-2)  # (..., T, d/2, 2) -> (..., T, d), pairs interleaved back


@POSITIONAL.register(ALiBiSpec)
class ALiBi(Positional):
    shift = "invariant"  # -m_h·|i-j| reads the distance alone

    def __init__(self, spec: ALiBiSpec, *, d_model: int, max_positions: int | None) -> None:
        super().__init__()

    @staticmethod
    def slopes(heads: int) -> torch.Tensor:
        """(H,) slopes m_h = 2^(-8h/H), h = 1..H (Press et al. 2021, §3)."""
        return torch.tensor([2.0 ** (-8.0 * h / heads) for h in range(1, heads + 1)])

    def attn_bias(self, heads: int, q_len: int, k_len: int, offset: int = 0) -> torch.Tensor:
        i = torch.arange(offset, offset + q_len)[:, None]
        j = torch.arange(k_len)[None, :]
        distance = (i - j).abs().float()  # (T, S) |i-j|; symmetric, so encoders can use it too
        return -self.slopes(heads)[:, None, None] * distance  # (H, 1, 1) · (T, S) -> (H, T, S): -m_h·|i-j|



def relative_bucket(distance: torch.Tensor, *, causal: bool, buckets: int, max_distance: int) -> torch.Tensor:
    """T5's bucket of each key-minus-query distance j - i (Raffel et al. 2020, §2.1; as their code defines it).
    Bidirectional: half the buckets for keys after the query (j > i), half for the others, by |j - i|; causal:
    all for i - j (a later key, masked anyway, falls with distance 0). Within a half of n buckets, distances
    d < n/2 are their own bucket, longer ones n/2 + ⌊log(d/(n/2)) / log(max_distance/(n/2)) · (n - n/2)⌋,
    at most n - 1."""
    if causal:
        n, start, d = buckets, torch.zeros_like(distance), (-distance).clamp(min=0)
    else:
        n = buckets // 2
        start, d = (distance > 0).long() * n, distance.abs()
    exact = n // 2
    scaled = torch.log(d.float().clamp(min=1) / exact) / math.log(max_distance / exact) * (n - exact)
    far = (exact + scaled.long()).clamp(max=n - 1)
    return start + torch.where(d < exact, d, far)


@POSITIONAL.register(BucketedSpec)
class Bucketed(Positional):
    """T5's relative position bias: a (buckets, heads) table, one per stack, read by every self-attention layer
    of the stack (``attn_bias``)."""

    per_head = True
    shift = "invariant"  # reads j - i alone

    def __init__(self, spec: BucketedSpec, *, d_model: int, max_positions: int | None, heads: int,
                 causal: bool) -> None:
        super().__init__()
        self.buckets, self.max_distance, self.causal = spec.buckets, spec.max_distance, causal
        self.bias = nn.Embedding(spec.buckets, heads)  # T5's relative_attention_bias
        nn.init.normal_(self.bias.weight, std=d_model**-0.5)  # as transformers initialises it

    def attn_bias(self, heads: int, q_len: int, k_len: int, offset: int = 0) -> torch.Tensor:
        """(H, T, S) b_h(bucket(j - i)) for queries at offset..offset+T-1 and keys 0..S-1."""
        i = torch.arange(offset, offset + q_len, device=self.bias.weight.device)[:, None]
        j = torch.arange(k_len, device=self.bias.weight.device)[None, :]
        rows = relative_bucket(j - i, causal=self.causal, buckets=self.buckets, max_distance=self.max_distance)
        return self.bias(rows).permute(2, 0, 1)  # (T, S, H) -> (H, T, S)

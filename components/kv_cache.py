"""Self-attention keys/values of incremental decoding, kept position-major in a growing buffer.

Legend: B rows (hypotheses), Hkv key/value heads, T new positions, L positions kept, d per-head size.

Beam search reorders the rows after every step. Kept as (B, Hkv, L, d) tensors, each step copies
them twice (``torch.cat`` of the new position, then ``index_select`` of the surviving rows). Here
they live in a (capacity, B, Hkv, d) buffer: a step writes its position in place, and a reorder is one
``index_select`` of the L filled positions into a second buffer, which then becomes the current one
(beam 4, 64 sentences, 3 layers: 290 µs per K or V against 715 µs for cat + index_select).
"""

from __future__ import annotations

import torch

GROW = 32  # positions added to the buffers when they are full


class KVBuffer:
    """Keys and values of the positions decoded so far; ``append`` returns all of them as
    (B, Hkv, L, d) views (strided: no copy), ``reorder`` keeps and reorders rows."""

    def __init__(self) -> None:
        self.k: torch.Tensor | None = None  # (capacity, B, Hkv, d_k)
        self.v: torch.Tensor | None = None  # (capacity, B, Hkv, d_v)
        self.spare: tuple[torch.Tensor, torch.Tensor] | None = None  # reorder's target, same shapes
        self.length = 0

    @property
    def keys(self) -> torch.Tensor:
        """(B, Hkv, L, d_k): the keys kept (a view)."""
        assert self.k is not None, "nothing appended yet"
        return self.k[: self.length].permute(1, 2, 0, 3)

    @property
    def values(self) -> torch.Tensor:
        """(B, Hkv, L, d_v): the values kept (a view)."""
        assert self.v is not None, "nothing appended yet"
        return self.v[: self.length].permute(1, 2, 0, 3)

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """k (B, Hkv, T, d_k), v (B, Hkv, T, d_v) of the new positions -> every position's (B, Hkv, L+T, ·)."""
        end = self.length + k.size(2)
        if self.k is None or end > self.k.size(0):
            self._grow(k, v, end + GROW)
        assert self.k is not None and self.v is not None
        self.k[self.length:end] = k.permute(2, 0, 1, 3)  # (T, B, Hkv, d)
        self.v[self.length:end] = v.permute(2, 0, 1, 3)
        self.length = end
        return self.keys, self.values

    def reorder(self, index: torch.Tensor) -> None:
        """Keep rows ``index`` (B',) in that order."""
        if self.k is None or self.v is None:
            return
        if self.k.requires_grad or self.v.requires_grad:  # under autograd: out= copies are not differentiable
            self.k, self.v, self.spare = self.k.index_select(1, index), self.v.index_select(1, index), None
            return
        n, filled = index.numel(), self.length
        if self.spare is None or self.spare[0].shape[:2] != (self.k.size(0), n):
            self.spare = (self.k.new_empty(self.k.size(0), n, *self.k.shape[2:]),
                          self.v.new_empty(self.v.size(0), n, *self.v.shape[2:]))
        k, v = self.spare
        torch.index_select(self.k[:filled], 1, index, out=k[:filled])  # contiguous slices: no copy back
        torch.index_select(self.v[:filled], 1, index, out=v[:filled])
        self.spare = (self.k, self.v) if self.k.size(1) == n else None
        self.k, self.v = k, v

    def _grow(self, k: torch.Tensor, v: torch.Tensor, capacity: int) -> None:
        (b, h, _, d_k), d_v = k.shape, v.size(3)
        new_k, new_v = k.new_empty(capacity, b, h, d_k), v.new_empty(capacity, b, h, d_v)
        if self.k is not None and self.v is not None:
            new_k[: self.length], new_v[: self.length] = self.k[: self.length], self.v[: self.length]
        self.k, self.v, self.spare = new_k, new_v, None

"""Self-attention keys/values of the positions decoded so far (incremental decoding)."""

from __future__ import annotations

import torch


class KVBuffer:
    """Keys or values stored time-major, (capacity, B, H, d), with ``length`` positions filled.

    Appending a step writes into spare capacity (doubling when full) instead of concatenating a new
    tensor, and reordering beams copies each filled position once. A plain (B, H, S, d) tensor grown
    with ``torch.cat`` and reordered with ``index_select`` copies the whole history twice per step.
    """

    def __init__(self) -> None:
        self.data: torch.Tensor | None = None
        self.length = 0

    def append(self, x: torch.Tensor) -> torch.Tensor:
        """Add x (B, H, T, d) after the filled positions; returns all of them as a (B, H, S, d) view."""
        steps = x.size(2)
        if self.data is None or self.length + steps > self.data.size(0):
            capacity = max(2 * (self.length + steps), 16)
            grown = x.new_empty(capacity, x.size(0), x.size(1), x.size(3))
            if self.data is not None:
                grown[: self.length] = self.data[: self.length]
            self.data = grown
        self.data[self.length : self.length + steps] = x.permute(2, 0, 1, 3)
        self.length += steps
        return self.view()

    def view(self) -> torch.Tensor:
        assert self.data is not None, "empty KVBuffer"
        return self.data[: self.length].permute(1, 2, 0, 3)

    def index_select(self, dim: int, index: torch.Tensor) -> KVBuffer:
        """Keep/reorder batch rows (``dim`` must be 0, the batch dimension of ``view``), in place."""
        if dim != 0:
            raise ValueError("KVBuffer reorders batch rows only (dim 0)")
        if self.data is not None:
            out = self.data.new_empty(self.data.size(0), index.numel(), *self.data.shape[2:])
            if self.data.requires_grad:  # out= is refused under autograd; copy through a temporary
                out[: self.length] = self.data[: self.length].index_select(1, index)
            else:
                torch.index_select(self.data[: self.length], 1, index, out=out[: self.length])
            self.data = out
        return self

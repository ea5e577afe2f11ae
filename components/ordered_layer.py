"""Layers whose blocks come in a declared order (``order``: components/specs/order.py), for the orders
other than the paper's (which keep ``EncoderLayer``, ``DecoderLayer`` and ``CausalLayer``).

Each block is a residual sub-layer (``Residual``) named as ``Layout.names`` says: the first self-attention,
cross-attention and feed-forward keep the paper's names (``self_attn``, ``cross_attn``, ``ffn``), later
ones are numbered (``ffn_2``); a self-attention's incremental-decoding keys and values are kept under
``self``, ``self_2``, … and a cross-attention's under ``cross``, ``cross_2``, … of the layer's cache.

Sequential (standard, macaron, sandwich, letters): each block in turn, x = Residual_i(x).
Parallel (GPT-J, PaLM §2): one norm, every block reads it, the outputs are added together:
x + Σ_i Dropout(Block_i(Norm(x))) (pre-norm only; the blocks' own norms are identities).

Legend: B batch, T length, S source length, D d_model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .positional import Positional
from .transformer import Residual


@dataclass
class _Inputs:
    """What a layer's blocks read besides x: the padding of x, the encoder's memory, positions, the cache."""

    positional: Positional
    pad: torch.Tensor | None = None  # (B, T) True at padding (an encoder's self-attention); (B, 1, T, T) a prefix LM's
    memory: torch.Tensor | None = None  # (M, S, D), M·beams = B (cross-attention)
    memory_pad: torch.Tensor | None = None
    cache: dict | None = None  # this layer's incremental-decoding state
    offset: int = 0
    beams: int = 1

    def part(self, name: str) -> dict | None:
        """The cache entry of block ``name``: self_attn_2 -> "self_2", cross_attn -> "cross"."""
        return None if self.cache is None else self.cache.setdefault(name.replace("_attn", ""), {})


class OrderedLayer(nn.Module):
    """A layer of residual blocks in ``blocks``' order: (letter a/c/f, module name, block) each;
    ``norm`` given: the parallel layer's one norm (the blocks' norms are then identities)."""

    def __init__(self, blocks: list[tuple[str, str, Residual]], norm: nn.Module | None = None) -> None:
        super().__init__()
        self.order = tuple((letter, name) for letter, name, _ in blocks)
        for _, name, block in blocks:
            self.add_module(name, block)
        self.norm = norm

    def run(self, x: torch.Tensor, inputs: _Inputs) -> torch.Tensor:
        """x (B, T, D) through the blocks, one after another or (with a norm) side by side."""
        if self.norm is None:
            for letter, name in self.order:
                x = self._block(getattr(self, name), letter, name, x, inputs)
            return x
        h, out = self.norm(x), x
        for letter, name in self.order:
            block: Residual = getattr(self, name)
            out = out + block.step(self._block(block.sublayer, letter, name, h, inputs))
        return out

    @staticmethod
    def _block(fn: nn.Module, letter: str, name: str, x: torch.Tensor, inputs: _Inputs) -> torch.Tensor:
        """``fn`` (a residual block or its sub-layer) applied to x with what its letter reads."""
        if letter == "a":
            return fn(x, key_padding_mask=inputs.pad, cache=inputs.part(name), positional=inputs.positional,
                      offset=inputs.offset)
        if letter == "c":
            return fn(x, inputs.memory, key_padding_mask=inputs.memory_pad, cache=inputs.part(name),
                      beams=inputs.beams)
        return fn(x)


class OrderedEncoderLayer(OrderedLayer):
    """An encoder layer (bidirectional self-attention) in a declared order; called as ``EncoderLayer``."""

    def forward(self, x: torch.Tensor, pad: torch.Tensor | None, positional: Positional) -> torch.Tensor:
        return self.run(x, _Inputs(positional, pad=pad))


class OrderedDecoderLayer(OrderedLayer):
    """An encoder-decoder's decoder layer in a declared order; called as ``DecoderLayer``."""

    def forward(self, x: torch.Tensor, memory: torch.Tensor, memory_pad: torch.Tensor | None,
                positional: Positional, cache: dict | None, offset: int, beams: int = 1,
                self_mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (M·beams, T, D), memory (M, S, D): ``beams`` consecutive rows of x share a memory row;
        ``self_mask`` as ``DecoderLayer``'s (packed rows)."""
        return self.run(x, _Inputs(positional, pad=self_mask, memory=memory, memory_pad=memory_pad, cache=cache,
                                   offset=offset, beams=beams))


class OrderedCausalLayer(OrderedLayer):
    """A decoder-only model's layer (masked self-attention, no cross-attention) in a declared order;
    called as ``CausalLayer``."""

    def forward(self, x: torch.Tensor, positional: Positional, cache: dict | None, offset: int,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.run(x, _Inputs(positional, pad=mask, cache=cache, offset=offset))

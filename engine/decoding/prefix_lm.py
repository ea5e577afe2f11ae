"""A decoder-only translator (``model.prefix_lm``) through the search: ``encode`` runs the prefix (the start,
BOS, the source, its EOS as the separator) through the decoder once, filling the self-attention cache, and
keeps the separator's next-token logits; the first ``step`` hands those back (the search feeds the start
there, which a prefix LM never reads) and moves the prefix's cache into the search's; every later step
is one cached ``decode`` of the tokens chosen. The outputs are the target alone.

A batch may hold sources of different lengths: the prefixes are then left-padded to end at one column,
so every row's target starts at the same column, and each row keeps what it had in training and what it
would have alone: its first token at position 0 (``Positional.shifted``) and no real position attending
padding (``DecoderOnly.decode``'s ``start``, kept per sentence and repeated over its beams). A positional
scheme with no shifted view (a plugin's) keeps batches of one source length (``mixes_lengths``)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from tbuild.components.transformer import DecoderCache


@dataclass
class PrefixMemory:
    """What ``encode`` keeps per sentence: the separator's logits (B, V), each prefix's left padding
    ``start`` (B,) (None: a batch of one source length, unpadded) and, until the first step takes it,
    the prefix's cache."""

    logits: torch.Tensor
    cache: DecoderCache | None
    start: torch.Tensor | None = None

    def index_select(self, dim: int, kept: torch.Tensor) -> PrefixMemory:
        """The sentences ``kept`` (the search drops finished ones; by then the cache has moved on)."""
        if self.cache is not None:
            self.cache.reorder(kept)
        start = None if self.start is None else self.start.index_select(0, kept)
        return PrefixMemory(self.logits.index_select(dim, kept), self.cache, start)



def mixes_lengths(model: nn.Module) -> bool:
    """Whether ``model``'s positional scheme has a view for left-padded batches (``Positional.shift``):
    sinusoidal, learned, RoPE, ALiBi and none do; a plugin's scheme may not."""
    return getattr(model.tgt_embed.positional, "shift", "none") != "none"


def left_padded(src: torch.Tensor, pad: torch.Tensor, first: int, fill: int) -> tuple[torch.Tensor, torch.Tensor]:
    """src (B, S) right-padded source ids ending with EOS, ``pad`` (B, S) their padding -> the prefixes
    (B, S + 1) ``first`` (the start), source, left-padded with ``fill`` to end at one column, and each row's
    left padding (B,)."""
    b, s = src.shape
    start = pad.sum(1)  # (B,)
    prefix = src.new_full((b, s + 1), fill)
    column = start[:, None] + torch.arange(s + 1, device=src.device)[None, :]  # row b's tokens from start[b]
    tokens = torch.cat([src.new_full((b, 1), first), src], 1)
    keep = column < s + 1  # the row's BOS and source, not its right padding
    prefix[keep.nonzero(as_tuple=True)[0], column[keep]] = tokens[keep]
    return prefix, start


class PrefixLMSearch:
    """A prefix LM as a ``SearchModel`` (``model.py``)."""

    def __init__(self, model: nn.Module) -> None:
        self.members = (model,)
        self.special = model.special
        self._decode = model.decode
        self.mixes_lengths = mixes_lengths(model)

    def encode(self, src: torch.Tensor, pad: torch.Tensor | None = None) -> tuple[PrefixMemory, torch.Tensor]:
        """src (B, S) source ids ending with EOS, right-padded (``pad`` (B, S): its padding; None: none) -> the
        prefix's memory and the source's padding mask (the output length limits read it). Sources of one
        length run unpadded."""
        pad = torch.zeros(src.shape, dtype=torch.bool, device=src.device) if pad is None else pad
        lengths, first = (~pad).sum(1), self.special.start
        cache = DecoderCache()
        if bool((lengths == lengths[0]).all()):
            prefix = torch.cat([src.new_full((src.size(0), 1), first), src[:, : int(lengths[0])]], 1)  # (B, P)
            logits = self._decode(prefix, cache)[:, -1].float()  # the separator's: the target's first token
            return PrefixMemory(logits, cache), pad
        if not self.mixes_lengths:
            raise ValueError("this prefix LM's positional scheme decodes a batch of sources of one length "
                             "(length_batches same_length)")
        prefix, start = left_padded(src, pad, first, self.special.fill)
        logits = self._decode(prefix, cache, start=start)[:, -1].float()
        return PrefixMemory(logits, cache, start), pad

    @staticmethod
    def new_cache() -> DecoderCache:
        return DecoderCache()

    def step(self, last: torch.Tensor, memory: PrefixMemory, pad: torch.Tensor, cache: DecoderCache,
             beams: int) -> torch.Tensor:
        if not cache.layers:  # the first step: the prefix's cache and the separator's logits (one row each)
            assert memory.cache is not None, "the first step of a prefix LM takes the prefix's cache"
            cache.layers, cache.offset, memory.cache = memory.cache.layers, memory.cache.offset, None
            return memory.logits.clone()  # the search log-softmaxes it in place
        start = None if memory.start is None else memory.start.repeat_interleave(beams)  # (N,): each row's
        return self._decode(last, cache, start=start)[:, -1].float()

    @staticmethod
    def select(memory: PrefixMemory, kept: torch.Tensor) -> PrefixMemory:
        return memory.index_select(0, kept)

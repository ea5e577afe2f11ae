"""A decoder-only translator (``model.prefix_lm``) through the search: ``encode`` runs the prefix (BOS,
the source, its EOS as the separator) through the decoder once, filling the self-attention cache, and
keeps the separator's next-token logits; the first ``step`` hands those back (the search feeds BOS
there, which a prefix LM never reads) and moves the prefix's cache into the search's; every later step
is one cached ``decode`` of the tokens chosen. The outputs are the target alone.

A batch holds sources of one length (``translator.length_batches(..., same_length=True)``): the
prefix then has no padding and every row's target starts at the same position, as in training."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from tbuild.builder.tokens import BOS, PAD
from tbuild.components.transformer import DecoderCache


@dataclass
class PrefixMemory:
    """What ``encode`` keeps per sentence: the separator's logits (B, V) and, until the first step takes
    it, the prefix's cache."""

    logits: torch.Tensor
    cache: DecoderCache | None

    def index_select(self, dim: int, kept: torch.Tensor) -> PrefixMemory:
        """The sentences ``kept`` (the search drops finished ones; by then the cache has moved on)."""
        if self.cache is not None:
            self.cache.reorder(kept)
        return PrefixMemory(self.logits.index_select(dim, kept), self.cache)


def is_prefix_lm(model: object) -> bool:
    """Whether ``model`` is a decoder-only translator (``DecoderOnly`` with ``model.prefix_lm``)."""
    return getattr(model, "prefix_lm", None) is not None


class PrefixLMSearch:
    """A prefix LM as a ``SearchModel`` (``model.py``)."""

    def __init__(self, model: nn.Module) -> None:
        self.members = (model,)
        self._decode = model.decode

    def encode(self, src: torch.Tensor) -> tuple[PrefixMemory, torch.Tensor]:
        """src (B, S) source ids ending with EOS, all of one length -> the prefix's memory and the source's
        padding mask (B, S) (the output length limits read it)."""
        lengths = src.ne(PAD).sum(1)
        if bool((lengths != lengths[0]).any()):
            raise ValueError("a prefix LM decodes a batch of sources of one length (length_batches same_length)")
        prefix = torch.cat([src.new_full((src.size(0), 1), BOS), src[:, : int(lengths[0])]], 1)  # (B, P)
        cache = DecoderCache()
        logits = self._decode(prefix, cache)[:, -1].float()  # the separator's: the target's first token
        return PrefixMemory(logits, cache), src.eq(PAD)

    @staticmethod
    def new_cache() -> DecoderCache:
        return DecoderCache()

    def step(self, last: torch.Tensor, memory: PrefixMemory, pad: torch.Tensor, cache: DecoderCache,
             beams: int) -> torch.Tensor:
        if not cache.layers:  # the first step: the prefix's cache and the separator's logits (one row each)
            assert memory.cache is not None, "the first step of a prefix LM takes the prefix's cache"
            cache.layers, cache.offset, memory.cache = memory.cache.layers, memory.cache.offset, None
            return memory.logits.clone()  # the search log-softmaxes it in place
        return self._decode(last, cache)[:, -1].float()

    @staticmethod
    def select(memory: PrefixMemory, kept: torch.Tensor) -> PrefixMemory:
        return memory.index_select(0, kept)

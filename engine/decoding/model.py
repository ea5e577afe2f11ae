"""What the search decodes with: a model seen through one protocol (encode once, a new cache, one
step's next-token scores, the memory rows of the sentences still decoding). A single model is adapted
to it by ``Single``; an ensemble (``ensemble.py``) implements it itself, so the search never asks
which one it has."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import torch

from tbuild.components.decoder_only import DecoderOnly
from tbuild.components.specs.special import Specials
from tbuild.components.transformer import DecoderCache

from .prefix_lm import PrefixLMSearch


class Cache(Protocol):
    """A decoder's incremental state, following the surviving beams."""

    def reorder(self, index: torch.Tensor, *, sources: torch.Tensor | None = None) -> None: ...


class Seq2Seq(Protocol):
    """An encoder-decoder as the search's callers have it (``EncoderDecoder``, the tests' toy models): its
    vocabulary's special ids, its encoder and its decoder."""

    special: Specials

    def encode(self, src: torch.Tensor, pad: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]: ...

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, memory_pad: torch.Tensor | None,
               cache: DecoderCache | None = None, *, beams: int = 1) -> torch.Tensor: ...


@runtime_checkable
class SearchModel(Protocol):
    """What the search needs. ``memory`` is whatever ``encode`` returns (one tensor, a ``PointedMemory``
    for a model with a decoder pointer, or one per model of an ensemble); the search only hands it back
    and ``select``s its rows (each kind has ``index_select``)."""

    members: Sequence[Any]  # the models behind it: one, or an ensemble's (alignments use the first)
    special: Specials  # the vocabulary's special ids: where outputs start and stop, what is never generated

    def encode(self, src: torch.Tensor, pad: torch.Tensor | None = None) -> tuple[Any, torch.Tensor]:
        """(memory, padding mask (B, S)) of the right-padded source ids (B, S) and their padding ``pad``
        (None: none)."""
        ...

    def new_cache(self) -> Cache: ...

    def step(self, last: torch.Tensor, memory: Any, pad: torch.Tensor, cache: Cache, beams: int) -> torch.Tensor:
        """(N, V) float32 scores of the next token of each row (``last``: (N, 1) the tokens fed now;
        ``beams`` rows per sentence of ``memory``); the search log-softmaxes them, in place."""
        ...

    def select(self, memory: Any, kept: torch.Tensor) -> Any:
        """``memory``'s rows of the sentences ``kept`` (indices)."""
        ...


class Single:
    """One encoder-decoder as a ``SearchModel``: its own ``encode`` and ``decode``, bound once (the
    step adds no work to the model's)."""

    def __init__(self, model: Seq2Seq) -> None:
        self.members = (model,)
        self.special = model.special
        self.encode = model.encode
        self._decode = model.decode

    @staticmethod
    def new_cache() -> DecoderCache:
        return DecoderCache()

    def step(self, last: torch.Tensor, memory: torch.Tensor, pad: torch.Tensor, cache: Cache,
             beams: int) -> torch.Tensor:
        return self._decode(last, memory, pad, cache, beams=beams)[:, -1].float()

    @staticmethod
    def select(memory: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
        return memory.index_select(0, kept)


def search_model(model: Seq2Seq | SearchModel) -> SearchModel:
    """``model`` as the search sees it: a ``SearchModel`` as it is, a module built adapted by its class
    (``SEARCHES``: a decoder-only translator's prefix-then-steps), any other encoder-decoder by ``Single``."""
    if isinstance(model, SearchModel):
        return model
    return SEARCHES.get(type(model), Single)(model)


SEARCHES: dict[type, Callable[[Any], SearchModel]] = {DecoderOnly: PrefixLMSearch}  # what a built class is searched as

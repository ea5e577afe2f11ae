"""Character-aware input blocks (``model.char_input``; specs in ``tbuild.components.specs.char_input``): a
piece's characters pooled into one vector that joins its embedding.

Legend: B batch, T length, D d_model, C characters per piece (``max_chars``), F filters, V vocabulary.
Each block holds ``spelling`` (V, C), every piece's bytes + 1 (0: padding), a buffer saved with the weights:
the model stays a pure function of its spec and its checkpoint. ``spell`` computes it from the tokenizer's
piece strings, when a run starts (the engine writes it in, as it writes train.init's tensors)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from .registry import CHAR_INPUT
from .specs.char_input import CharCNNSpec

BYTES = 256  # a character id is its UTF-8 byte + 1; 0 pads
WORD_START = [b + 1 for b in "▁".encode()]  # sentencepiece's word-start mark, as character ids


class CharInput(nn.Module):
    """Base of the character inputs: the spelling table and ``forward(ids, vectors)`` → vectors (B, T, D)."""

    def __init__(self, vocab_size: int, max_chars: int) -> None:
        super().__init__()
        self.max_chars = max_chars
        self.register_buffer("spelling", torch.zeros(vocab_size, max_chars, dtype=torch.long))

    def spell(self, pieces: Sequence[str | None]) -> torch.Tensor:
        """The spelling table (V, C) of a vocabulary's piece strings (None: a piece with no characters, as
        padding, BOS, EOS and UNK): each piece's first ``max_chars`` UTF-8 bytes + 1, zeros after."""
        table = torch.zeros(len(pieces), self.max_chars, dtype=torch.long)
        for i, piece in enumerate(pieces):
            data = (piece or "").encode("utf-8")[:self.max_chars]
            table[i, :len(data)] = torch.tensor(list(data), dtype=torch.long) + 1
        return table


@CHAR_INPUT.register(CharCNNSpec)
class CharCNN(CharInput):
    """Ma & Hovy 2016 §2.1: bytes embedded (B·T, C, dim), one convolution (B·T, F, C), the maximum over a piece's
    own characters (B·T, F; zeros for a piece with none), projected to D and added (or concatenated with the
    piece's embedding and projected)."""

    def __init__(self, spec: CharCNNSpec, *, d_model: int, vocab_size: int) -> None:
        super().__init__(vocab_size, spec.max_chars)
        self.combine = spec.combine
        self.pool = spec.pool
        self.chars = nn.Embedding(BYTES + 1, spec.dim, padding_idx=0)
        self.conv = nn.Conv1d(spec.dim, spec.filters, spec.width, padding=spec.width // 2)
        self.project = nn.Linear(spec.filters + (d_model if spec.combine == "concat" else 0), d_model)

    def forward(self, ids: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
        spelt = self.spelling[ids].flatten(0, 1)  # (B·T, C)
        h = self.conv(self.chars(spelt).transpose(1, 2))[..., :spelt.shape[1]]  # (B·T, F, C); even widths cut
        h = h.masked_fill((spelt == 0).unsqueeze(1), float("-inf")).amax(-1)
        h = torch.where(torch.isinf(h), torch.zeros_like(h), h).view(*ids.shape, -1)  # no characters: zeros
        if self.pool == "word":
            h = self.word_maximum(ids, h)
        if self.combine == "concat":
            return self.project(torch.cat([vectors, h.to(vectors.dtype)], -1))
        return vectors + self.project(h)

    def word_maximum(self, ids: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """Each piece's vector (B, T, F) replaced by the maximum over its word's pieces: a word starts at a piece
        spelt with ▁ first or one with no characters (padding, BOS, EOS: each its own word). The maximum over a
        word's characters is the maximum of its pieces' maxima (windows across a piece boundary aside)."""
        spelt = self.spelling[ids]  # (B, T, C)
        mark = torch.tensor(WORD_START, device=ids.device)
        starts = (spelt[..., :len(WORD_START)] == mark).all(-1) | (spelt[..., 0] == 0)
        starts[:, 0] = True
        word = (starts.long().cumsum(1) - 1).unsqueeze(-1).expand_as(h)  # (B, T, F): each piece's word index
        maxima = torch.full_like(h, float("-inf")).scatter_reduce(1, word, h, "amax")
        return maxima.gather(1, word)

"""The encoder-only graph: the Transformer's encoder stack (§3.1: self-attention over the whole input and
the position-wise FFN, each in a residual connection) and an output head over its final states (a
tagger's per-position label scores, or a classifier's scores of the whole input), no decoder.

Legend: B batch, S length, D d_model, L labels. The parameters are named as the encoder-decoder's source
side (``src_embed``, ``encoder``, ``encoder_norm``), so an encoder-decoder's encoder loads into it by name
(``train.init``); the head (``head``) is its own.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from .transformer import Embedding, EncoderLayer, encode_source
from .weights import Stack, WeightTree

ENCODER_ONLY = WeightTree(
    stacks=(Stack("encoder", layers="encoder", embedding="src_embed", norm="encoder_norm"),),
    output="head",
    vocab_rows=frozenset({"src_embed.tokens.weight"}),
    exports={},  # exported through Hugging Face classes, each family's map in engine/hf
)


class EncoderOnly(nn.Module):
    """``encode`` token ids to final states; ``forward`` gives the head's scores (at every position, or for
    the whole input)."""

    WEIGHTS: ClassVar[WeightTree] = ENCODER_ONLY  # its parts (components/weights.py)

    def __init__(self, *, src_embed: Embedding, encoder: list[EncoderLayer], encoder_norm: nn.Module | None,
                 head: nn.Module) -> None:
        super().__init__()
        self.src_embed = src_embed
        self.encoder = nn.ModuleList(encoder)
        self.encoder_norm = encoder_norm
        self.head = head

    def encode(self, src: torch.Tensor, pad: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S) ids and their padding ``pad`` (B, S), True at padding (None: none) -> final states
        (B, S, D) and the padding mask."""
        return encode_source(src, self.src_embed, self.encoder, self.encoder_norm, pad)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor | None = None,
                src_pad: torch.Tensor | None = None) -> torch.Tensor:
        """The head's scores: (B, S, L) at every source position (a tagger's), or (B, 1, L) for the whole
        input (a sequence classifier's, ``heads.py``); ``src_pad`` (B, S): the source's padding. ``tgt`` is
        the trainer's decoder input, which an encoder-only model has none of: unused."""
        del tgt
        states, pad = self.encode(src, src_pad)
        return self.head(states, pad)

"""The decoder-only graph: a causal language model, the Transformer's decoder stack (§3.1) without the
encoder and its encoder-decoder attention. Each layer is masked self-attention (§3.2.3: a position sees
itself and the positions before it) then the position-wise FFN (§3.3), each in a residual connection;
the output projection predicts the next token (tied to the embedding as §3.4 when the spec says so).

Legend: B batch, T length, D d_model, V vocabulary. The parameter names are those of the
encoder-decoder's target side (``tgt_embed``, ``decoder``, ``decoder_norm``, ``output``), so weights
move between the two kinds by name where their tensors match.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from .positional import Positional
from .transformer import DecoderCache, Embedding, Residual
from .weights import Stack, WeightTree


class CausalLayer(nn.Module):
    """Masked self-attention then FFN (a decoder layer of §3.1 without encoder-decoder attention)."""

    def __init__(self, self_attn: Residual, ffn: Residual) -> None:
        super().__init__()
        self.self_attn, self.ffn = self_attn, ffn

    def forward(self, x: torch.Tensor, positional: Positional, cache: dict | None, offset: int) -> torch.Tensor:
        """x (B, T, D) at positions offset..offset+T-1; ``cache`` (incremental decoding) holds the keys and
        values of the earlier positions and gets this call's."""
        x = self.self_attn(x, cache=None if cache is None else cache.setdefault("self", {}),
                           positional=positional, offset=offset)
        return self.ffn(x)


DECODER_ONLY = WeightTree(
    stacks=(Stack("decoder", layers="decoder", embedding="tgt_embed", norm="decoder_norm"),),
    output="output",
    vocab_rows=frozenset({"tgt_embed.tokens.weight", "output.weight", "output.bias"}),
    exports={},  # no export target maps a decoder-only model yet
)


class DecoderOnly(nn.Module):
    """A causal language model: ``decode`` token ids (BOS first) to next-token logits, whole or one step
    at a time with a ``DecoderCache``."""

    WEIGHTS: ClassVar[WeightTree] = DECODER_ONLY  # its parts (components/weights.py)

    def __init__(self, *, tgt_embed: Embedding, decoder: list[CausalLayer], decoder_norm: nn.Module | None,
                 output: nn.Linear, pad_id: int) -> None:
        super().__init__()
        self.tgt_embed = tgt_embed
        self.decoder = nn.ModuleList(decoder)
        self.decoder_norm = decoder_norm
        self.output = output  # pre-softmax linear transformation (§3.4), possibly tied
        self.pad_id = pad_id

    def decode(self, tgt: torch.Tensor, cache: DecoderCache | None = None) -> torch.Tensor:
        """tgt (B, T) ids -> logits (B, T, V) of each position's next token. With a cache, tgt holds only
        the new positions; the earlier ones come from the cache, which is updated. Padding is right of
        the tokens, so the causal mask alone keeps every real position from seeing it."""
        offset = cache.offset if cache is not None else 0
        if cache is not None and not cache.layers:
            cache.layers = [{} for _ in self.decoder]
        x = self.tgt_embed(tgt, offset)
        for i, layer in enumerate(self.decoder):
            x = layer(x, self.tgt_embed.positional, None if cache is None else cache.layers[i], offset)
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        if cache is not None:
            cache.offset += tgt.size(1)
        return self.output(x)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """Teacher-forced logits (B, T, V) of shifted-right ``tgt`` (B, T): the trainer's call. ``src`` is the
        batch's source side, which a language model's data has none of (an EOS-only row each): unused."""
        del src
        return self.decode(tgt)

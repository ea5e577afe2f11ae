"""The decoder-only graph: a causal language model, the Transformer's decoder stack (§3.1) without the
encoder and its encoder-decoder attention. Each layer is masked self-attention (§3.2.3: a position sees
itself and the positions before it) then the position-wise FFN (§3.3), each in a residual connection;
the output projection predicts the next token (tied to the embedding as §3.4 when the spec says so).

A prefix LM (``model.prefix_lm``, Raffel et al. 2020 §3.2.1) translates with the same stack: each pair
is one sequence BOS, source pieces, EOS (the separator), target pieces, EOS. With ``attention: prefix``
the first P = |source| + 2 positions (BOS, source, separator) attend to each other both ways and the
rest causally (``prefix_mask``); with ``attention: causal`` every position is causal.

Legend: B batch, T length, D d_model, V vocabulary, P prefix length. The parameter names are those of the
encoder-decoder's target side (``tgt_embed``, ``decoder``, ``decoder_norm``, ``output``), so weights
move between the two kinds by name where their tensors match.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch
from torch import nn

from .positional import Positional
from .transformer import DecoderCache, Embedding, Residual
from .weights import Stack, WeightTree

if TYPE_CHECKING:
    from .specs.special import Specials


class CausalLayer(nn.Module):
    """Masked self-attention then FFN (a decoder layer of §3.1 without encoder-decoder attention)."""

    def __init__(self, self_attn: Residual, ffn: Residual) -> None:
        super().__init__()
        self.self_attn, self.ffn = self_attn, ffn

    def forward(self, x: torch.Tensor, positional: Positional, cache: dict | None, offset: int,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, T, D) at positions offset..offset+T-1; ``cache`` (incremental decoding) holds the keys and
        values of the earlier positions and gets this call's; ``mask`` (B, 1, T, T) True where a query may
        not see a key (a prefix LM's, ``prefix_mask``)."""
        x = self.self_attn(x, key_padding_mask=mask, cache=None if cache is None else cache.setdefault("self", {}),
                           positional=positional, offset=offset)
        return self.ffn(x)


def prefix_mask(prefix: torch.Tensor, length: int) -> torch.Tensor:
    """(B, 1, T, T) True where query i may not see key j: it sees j ≤ i (causal, §3.2.3) and every j
    below its row's prefix length ``prefix`` (B,) (bidirectional over the prefix). Padding sits right of
    each row's tokens, so no real query sees it."""
    i = torch.arange(length, device=prefix.device)[:, None]
    j = torch.arange(length, device=prefix.device)[None, :]
    allowed = (j <= i) | (j < prefix[:, None, None])  # (B, T, T)
    return ~allowed[:, None]


def left_padding_mask(start: torch.Tensor, offset: int, length: int) -> torch.Tensor:
    """(B, 1, T, S = offset + T) True where query i (column offset + i) may not see key j in a left-padded
    batch: row b's columns before start[b] (B,) are padding, seen by no query but a padding query's own
    column (so no softmax row is empty; a padding query's output is never read)."""
    i = torch.arange(offset, offset + length, device=start.device)[:, None]
    j = torch.arange(offset + length, device=start.device)[None, :]
    return ((j < start[:, None, None]) & (j != i))[:, None]


def pack(src: torch.Tensor, lengths: torch.Tensor, tgt_in: torch.Tensor, start: int,
         fill: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A prefix LM's sequences from a batch of pairs: src (B, S) source ids ending with EOS (the separator),
    ``lengths`` (B,) theirs, and tgt_in (B, T) the start (BOS) then the target -> (B, S + T) ids start,
    source, EOS, target, right-padded with ``fill``, and the prefix lengths P (B,) (start, source,
    separator)."""
    b, s = src.shape
    prefix = lengths + 1  # (B,)
    seq = torch.full((b, s + tgt_in.size(1)), fill, dtype=src.dtype, device=src.device)
    seq[:, 0] = start
    seq[:, 1:s + 1] = src
    if tgt_in.size(1) > 1:  # the target after each row's separator (over that row's source padding)
        where = prefix[:, None] + torch.arange(tgt_in.size(1) - 1, device=src.device)[None, :]
        seq.scatter_(1, where, tgt_in[:, 1:])
    return seq, prefix


DECODER_ONLY = WeightTree(
    stacks=(Stack("decoder", layers="decoder", embedding="tgt_embed", norm="decoder_norm"),),
    output="output",
    vocab_rows=frozenset({"tgt_embed.tokens.weight", "output.weight", "output.bias"}),
    exports={},  # exported through Hugging Face classes, each family's map in engine/hf
)


class DecoderOnly(nn.Module):
    """A causal language model: ``decode`` token ids (BOS first) to next-token logits, whole or one step
    at a time with a ``DecoderCache``."""

    WEIGHTS: ClassVar[WeightTree] = DECODER_ONLY  # its parts (components/weights.py)

    def __init__(self, *, tgt_embed: Embedding, decoder: list[CausalLayer], decoder_norm: nn.Module | None,
                 output: nn.Linear, special: Specials, prefix_lm: tuple[str, str] | None = None) -> None:
        super().__init__()
        self.tgt_embed = tgt_embed
        self.decoder = nn.ModuleList(decoder)
        self.decoder_norm = decoder_norm
        self.output = output  # pre-softmax linear transformation (§3.4), possibly tied
        self.special = special  # the vocabulary's special ids: the start a prefix LM packs, the search's
        self.prefix_lm = prefix_lm  # (attention, loss) of model.prefix_lm, or None: a language model

    def states(self, tgt: torch.Tensor, cache: DecoderCache | None = None,
               prefix: torch.Tensor | None = None, start: torch.Tensor | None = None) -> torch.Tensor:
        """tgt (B, T) ids -> the final states (B, T, D) (``decode`` before the output projection)."""
        offset = cache.offset if cache is not None else 0
        if cache is not None and not cache.layers:
            cache.layers = [{} for _ in self.decoder]
        mask = None
        if prefix is not None and self.prefix_lm is not None and self.prefix_lm[0] == "prefix":
            mask = prefix_mask(prefix, tgt.size(1))
        positional = self.tgt_embed.positional
        if start is not None:  # a left-padded batch: each row's positions from its first token
            shifted = positional.shifted(start)
            if shifted is None:
                raise ValueError(f"{type(positional).__name__} positions cannot decode a left-padded batch")
            positional, padding = shifted, left_padding_mask(start, offset, tgt.size(1))
            mask = padding if mask is None else mask | padding
        x = self.tgt_embed(tgt, offset, positional=positional)
        for i, layer in enumerate(self.decoder):
            x = layer(x, positional, None if cache is None else cache.layers[i], offset, mask)
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        if cache is not None:
            cache.offset += tgt.size(1)
        return x

    def decode(self, tgt: torch.Tensor, cache: DecoderCache | None = None,
               prefix: torch.Tensor | None = None, start: torch.Tensor | None = None) -> torch.Tensor:
        """tgt (B, T) ids -> logits (B, T, V) of each position's next token. With a cache, tgt holds only
        the new positions; the earlier ones come from the cache, which is updated. Padding is right of
        the tokens, so the causal mask alone keeps every real position from seeing it. ``prefix`` (B,):
        a prefix LM's prefix lengths (whole sequences, no cache; ``prefix_mask``); with a cache, a prefix
        fed whole is bidirectional and each later step sees every cached position. ``start`` (B,): a
        left-padded batch (a prefix LM decoding sources of different lengths): row b's first start[b]
        columns (of the cache's and these) are padding, masked for every real query, and its positions
        count from its first token (``Positional.shifted``), so each row computes what it would alone."""
        return self.output(self.states(tgt, cache, prefix, start))

    def forward(self, src: torch.Tensor, tgt: torch.Tensor, src_pad: torch.Tensor | None = None) -> torch.Tensor:
        """Teacher-forced logits (B, T, V) of shifted-right ``tgt`` (B, T): the trainer's call. A language
        model's data has no source (an EOS-only row each): unused. A prefix LM's ``src`` is the source
        (ending with EOS, the separator; ``src_pad`` (B, S) its padding, None: none): with loss target the
        pair is packed (``pack``) and the logits of the target positions come back, aligned with the target;
        with loss both ``tgt`` already holds BOS, source, separator, target (``engine/data/joined.py``) and
        every position's logits come back."""
        if self.prefix_lm is None:
            return self.decode(tgt)
        lengths = src.new_full((src.size(0),), src.size(1)) if src_pad is None else (~src_pad).sum(1)
        if self.prefix_lm[1] == "both":
            return self.decode(tgt, prefix=lengths + 1)
        seq, prefix = pack(src, lengths, tgt, self.special.start, self.special.fill)
        x = self.states(seq, prefix=prefix)  # (B, S + T, D)
        where = prefix[:, None] - 1 + torch.arange(tgt.size(1), device=tgt.device)[None, :]  # separator on
        return self.output(x.gather(1, where[..., None].expand(-1, -1, x.size(-1))))

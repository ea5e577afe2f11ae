"""The peers tbuild is timed against, built at a ``Shape``'s dimensions as tbuild's benchmark spec
(post-norm, no final norm, ReLU, sinusoidal positions, embeddings × √d_model, three-way tying,
dropout 0.1): ``torch.nn.Transformer`` and Hugging Face's ``MarianMTModel`` (the "bench" extra).

Shape legend: B batch, S source length, T target length, D d_model, V vocabulary."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from tbuild.components.positional import sinusoid_table
from tbuild.components.specs.special import BOS, EOS, PAD
from tbuild.engine.errors import TbuildError
from tbuild.engine.extras import require

from .workload import Shape

MAX_POSITIONS = 1024
DROPOUT = 0.1


class TorchTransformer(nn.Module):
    """``torch.nn.Transformer`` with a shared token embedding (source, target, output projection),
    sinusoidal positions and embedding dropout around it: the model written with PyTorch's own block."""

    def __init__(self, shape: Shape, vocab: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, shape.d_model, padding_idx=PAD)
        nn.init.normal_(self.embed.weight, std=shape.d_model**-0.5)
        self.register_buffer("positions", sinusoid_table(MAX_POSITIONS, shape.d_model).float(), persistent=False)
        self.scale = math.sqrt(shape.d_model)
        self.drop = nn.Dropout(DROPOUT)
        self.core = nn.Transformer(shape.d_model, shape.heads, shape.layers, shape.layers, shape.d_ff, DROPOUT,
                                   activation="relu", batch_first=True, norm_first=False)
        # nn.Transformer always adds a LayerNorm after each stack; post-norm (as the paper and tbuild's
        # base) has none, so the comparison drops them.
        self.core.encoder.norm = None
        self.core.decoder.norm = None

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.drop(self.embed(ids) * self.scale + self.positions[: ids.size(1)])  # (B, L, D)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """(B, S), (B, T) ids -> (B, T, V) logits."""
        t = tgt_in.size(1)
        causal = torch.ones(t, t, dtype=torch.bool, device=src.device).triu_(1)  # True: masked
        src_pad, tgt_pad = src.eq(PAD), tgt_in.eq(PAD)
        out = self.core(self._embed(src), self._embed(tgt_in), tgt_mask=causal, src_key_padding_mask=src_pad,
                        tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad, tgt_is_causal=True)
        return F.linear(out, self.embed.weight)


def marian_available() -> str | None:
    """None if transformers can be imported, else why the Hugging Face rows are skipped."""
    try:
        require("transformers", "tbuild[bench]", "the Hugging Face peer")
    except TbuildError as e:
        return str(e)
    return None


def marian_model(shape: Shape, vocab: int) -> nn.Module:
    """Hugging Face ``MarianMTModel`` at ``shape`` (random weights)."""
    from transformers import MarianConfig, MarianMTModel

    config = MarianConfig(
        vocab_size=vocab, d_model=shape.d_model, encoder_layers=shape.layers, decoder_layers=shape.layers,
        encoder_attention_heads=shape.heads, decoder_attention_heads=shape.heads, encoder_ffn_dim=shape.d_ff,
        decoder_ffn_dim=shape.d_ff, activation_function="relu", scale_embedding=True, dropout=DROPOUT,
        attention_dropout=0.0, activation_dropout=0.0, max_position_embeddings=MAX_POSITIONS,
        pad_token_id=PAD, eos_token_id=EOS, bos_token_id=BOS, decoder_start_token_id=BOS, forced_eos_token_id=None,
    )
    return MarianMTModel(config)


class MarianLogits(nn.Module):
    """``MarianMTModel`` called as the other implementations: (src, tgt_in) ids -> logits, with the
    attention masks Hugging Face expects."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=src, attention_mask=src.ne(PAD), decoder_input_ids=tgt_in,
                          decoder_attention_mask=tgt_in.ne(PAD)).logits

"""The output heads of an encoder-only model (``model.head``; specs in ``specs/head.py``). Each is called
with the final encoder states (B, S, D) and the padding mask (B, S), True at padding: a tagger's, a classifier's, a
masked LM's, or a sentence vector's pooling (no weights). A head whose spec is
``vocab_sized`` (a masked LM's) is built with ``vocab_size`` too."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .registry import HEAD, NORM
from .spec_base import ComponentSpec
from .specs.head import MaskedLMSpec, SentenceEmbeddingSpec, SequenceClassificationSpec, TokenClassificationSpec


def pooled(states: torch.Tensor, pad: torch.Tensor | None, first: bool) -> torch.Tensor:
    """states (B, S, D), pad (B, S) -> one vector per input (B, D): the first position's state (``first``),
    else the mean over the non-padding positions."""
    if first:
        return states[:, 0]
    if pad is None:
        return states.mean(1)
    keep = (~pad).unsqueeze(-1).to(states.dtype)  # (B, S, 1)
    return (states * keep).sum(1) / keep.sum(1).clamp(min=1.0)


@HEAD.register(TokenClassificationSpec)
class TokenClassification(nn.Linear):
    """Scores of each label at every position: a linear layer over the final encoder states (B, S, D) ->
    (B, S, labels). Its parameters are ``head.weight`` and ``head.bias``."""

    def __init__(self, spec: TokenClassificationSpec, *, d_model: int) -> None:
        super().__init__(d_model, spec.label_count(), bias=spec.bias)

    def forward(self, states: torch.Tensor, pad: torch.Tensor | None = None) -> torch.Tensor:
        """states (B, S, D) -> scores (B, S, L); ``pad`` is unused (padding positions carry no label)."""
        del pad
        return super().forward(states)


@HEAD.register(SequenceClassificationSpec)
class SequenceClassification(nn.Linear):
    """Scores of each label for the whole input: the final states pooled (``pooling``: the mean over the
    non-padding positions, or the first position's), then a linear layer -> (B, 1, labels), one position's
    scores, so a classifier's loss and accuracy go through the tagger's per-position code unchanged. Its
    parameters are ``head.weight`` and ``head.bias`` (and ``head.dense.*`` with ``dense``: tanh(W·pooled + b)
    before the output layer, BERT's pooler)."""

    def __init__(self, spec: SequenceClassificationSpec, *, d_model: int) -> None:
        super().__init__(d_model, spec.label_count(), bias=spec.bias)
        self.pooling = spec.pooling
        self.dense = nn.Linear(d_model, d_model) if spec.dense else None

    def pool(self, states: torch.Tensor, pad: torch.Tensor | None) -> torch.Tensor:
        """states (B, S, D), pad (B, S) -> one vector per input (B, D)."""
        return pooled(states, pad, self.pooling == "first")

    def forward(self, states: torch.Tensor, pad: torch.Tensor | None = None) -> torch.Tensor:
        """states (B, S, D) and pad (B, S) -> scores (B, 1, L)."""
        vector = self.pool(states, pad)
        if self.dense is not None:
            vector = torch.tanh(self.dense(vector))
        return super().forward(vector).unsqueeze(1)


@HEAD.register(MaskedLMSpec)
class MaskedLM(nn.Linear):
    """Scores of every vocabulary piece at every position (a masked LM's, Devlin et al. 2019 §3.1): a linear
    layer over the final encoder states (B, S, D) -> (B, S, V). Its parameters are ``head.weight`` (the token
    embedding's table where ``model.tie_embeddings`` ties them: the builder sets it) and ``head.bias``. With
    ``transform`` (BERT's), each state first goes through ``head.dense``, exact GELU and ``head.norm`` (the
    ``norm`` spec: model.norm's kind and eps)."""

    def __init__(self, spec: MaskedLMSpec, *, d_model: int, vocab_size: int, norm: ComponentSpec | None = None) -> None:
        super().__init__(d_model, vocab_size, bias=spec.bias)
        self.dense = nn.Linear(d_model, d_model) if spec.transform else None
        self.norm = NORM.build(norm, d_model=d_model) if spec.transform and norm is not None else None

    def forward(self, states: torch.Tensor, pad: torch.Tensor | None = None) -> torch.Tensor:
        """states (B, S, D) -> scores (B, S, V); ``pad`` is unused (padding positions carry no loss)."""
        del pad
        if self.dense is not None:
            states = F.gelu(self.dense(states))
            states = states if self.norm is None else self.norm(states)
        return super().forward(states)


@HEAD.register(SentenceEmbeddingSpec)
class SentenceEmbedding(nn.Module):
    """One vector per input, no parameter: the final states (B, S, D) pooled (``pooling``: the mean over the
    non-padding positions, or the first position's, [CLS]) and, with ``normalize``, divided by their L2 norm
    (sentence-transformers' Pooling and Normalize modules) -> (B, 1, D), one position's vector as a
    classifier's scores are."""

    def __init__(self, spec: SentenceEmbeddingSpec, *, d_model: int) -> None:
        super().__init__()
        del d_model
        self.pooling, self.normalize = spec.pooling, spec.normalize

    def forward(self, states: torch.Tensor, pad: torch.Tensor | None = None) -> torch.Tensor:
        """states (B, S, D) and pad (B, S) -> vectors (B, 1, D)."""
        vectors = pooled(states, pad, self.pooling == "cls")
        return (F.normalize(vectors, dim=-1) if self.normalize else vectors).unsqueeze(1)

"""The output heads of an encoder-only model (``model.head``; specs in ``specs/head.py``)."""

from __future__ import annotations

from torch import nn

from .registry import HEAD
from .specs.head import TokenClassificationSpec


@HEAD.register(TokenClassificationSpec)
class TokenClassification(nn.Linear):
    """Scores of each label at every position: a linear layer over the final encoder states (B, S, D) ->
    (B, S, labels). Its parameters are ``head.weight`` and ``head.bias``."""

    def __init__(self, spec: TokenClassificationSpec, *, d_model: int) -> None:
        super().__init__(d_model, spec.label_count(), bias=spec.bias)

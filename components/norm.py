"""Normalisation blocks. Shapes: (..., D) -> (..., D)."""

from __future__ import annotations

import torch
from torch import nn

from .registry import NORM
from .specs.norm import LayerNormSpec, RMSNormSpec

__all__ = ["LayerNorm", "LayerNormSpec", "RMSNorm", "RMSNormSpec"]


@NORM.register(LayerNormSpec)
class LayerNorm(nn.LayerNorm):
    def __init__(self, spec: LayerNormSpec, *, d_model: int) -> None:
        super().__init__(d_model, eps=spec.eps)


@NORM.register(RMSNormSpec)
class RMSNorm(nn.Module):
    def __init__(self, spec: RMSNormSpec, *, d_model: int) -> None:
        super().__init__()
        self.eps = spec.eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # ā_i = a_i / RMS(a) · g_i, RMS(a) = sqrt(mean_i a_i² + eps) (Zhang & Sennrich 2019, Eq. 4)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

"""Normalisation blocks. Shapes: (..., D) -> (..., D)."""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field
from torch import nn

from .registry import NORM
from .spec_base import ComponentSpec


class LayerNormSpec(ComponentSpec):
    """Layer normalisation (Ba et al. 2016), as in the paper's sub-layers (§3.1)."""

    kind: Literal["layernorm"] = "layernorm"
    eps: float = Field(1e-6, gt=0, description="Added to the variance; 1e-6 as in tensor2tensor.")


@NORM.register(LayerNormSpec)
class LayerNorm(nn.LayerNorm):
    def __init__(self, spec: LayerNormSpec, *, d_model: int) -> None:
        super().__init__(d_model, eps=spec.eps)


class RMSNormSpec(ComponentSpec):
    """Root-mean-square normalisation (Zhang & Sennrich 2019): no mean subtraction, no bias."""

    kind: Literal["rmsnorm"] = "rmsnorm"
    eps: float = Field(1e-6, gt=0, description="Added to the mean square.")


@NORM.register(RMSNormSpec)
class RMSNorm(nn.Module):
    def __init__(self, spec: RMSNormSpec, *, d_model: int) -> None:
        super().__init__()
        self.eps = spec.eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # ā_i = a_i / RMS(a) · g_i, RMS(a) = sqrt(mean_i a_i² + eps) (Zhang & Sennrich 2019, Eq. 4)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

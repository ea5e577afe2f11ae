"""Position-wise feed-forward blocks (§3.3). Shapes: (B, T, D) -> (B, T, D)."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from .dropout import Dropout
from .registry import FFN
from .spec_base import ComponentSpec


class ReLUFFNSpec(ComponentSpec):
    """FFN(x) = max(0, xW1 + b1)W2 + b2 (§3.3, Eq. 2); inner size d_ff from the stack."""

    kind: Literal["relu"] = "relu"


class GELUFFNSpec(ComponentSpec):
    """As `relu` with the GELU activation (Hendrycks & Gimpel 2016)."""

    kind: Literal["gelu"] = "gelu"


class SwiGLUFFNSpec(ComponentSpec):
    """Gated FFN (Shazeer 2020): (SiLU(xW1) * xV)W2, no biases. d_ff is the gated inner width, so
    it has 3·D·d_ff weights; use d_ff ≈ 2/3 of a ReLU FFN's for equal parameters."""

    kind: Literal["swiglu"] = "swiglu"


class _TwoLayerFFN(nn.Module):
    """W2(act(W1 x + b1)) + b2 with dropout on the activation."""

    def __init__(self, *, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff)
        self.w2 = nn.Linear(d_ff, d_model)
        self.dropout = Dropout(dropout)

    def activation(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(self.dropout(self.activation(self.w1(x))))


@FFN.register(ReLUFFNSpec)
class ReLUFFN(_TwoLayerFFN):
    def __init__(self, spec: ReLUFFNSpec, *, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__(d_model=d_model, d_ff=d_ff, dropout=dropout)

    def activation(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x)  # max(0, ·), §3.3 Eq. 2


@FFN.register(GELUFFNSpec)
class GELUFFN(_TwoLayerFFN):
    def __init__(self, spec: GELUFFNSpec, *, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__(d_model=d_model, d_ff=d_ff, dropout=dropout)

    def activation(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)


@FFN.register(SwiGLUFFNSpec)
class SwiGLUFFN(nn.Module):
    def __init__(self, spec: SwiGLUFFNSpec, *, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.v = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(self.dropout(F.silu(self.w1(x)) * self.v(x)))

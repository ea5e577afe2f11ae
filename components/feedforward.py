"""Position-wise feed-forward blocks (§3.3). Shapes: (B, T, D) -> (B, T, D)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .dropout import Dropout
from .registry import FFN
from .specs.feedforward import (
    GEGLUFFNSpec,
    GELUFFNSpec,
    GELUTanhFFNSpec,
    ReLUFFNSpec,
    SiLUFFNSpec,
    SwiGLUFFNSpec,
    TwoLayerSpec,
)

__all__ = ["GEGLUFFN", "GEGLUFFNSpec", "GELUFFN", "GELUFFNSpec", "GELUTanhFFN", "GELUTanhFFNSpec", "ReLUFFN",
           "ReLUFFNSpec", "SiLUFFN",
           "SiLUFFNSpec", "SwiGLUFFN", "SwiGLUFFNSpec"]


class _TwoLayerFFN(nn.Module):
    """W2(act(W1 x + b1)) + b2 with dropout on the activation (without b1, b2 where the spec's ``bias`` is
    false)."""

    def __init__(self, spec: TwoLayerSpec | None = None, *, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        bias = getattr(spec, "bias", True)  # a plugin's subclass may pass no spec, or one without the field
        self.w1 = nn.Linear(d_model, d_ff, bias=bias)
        self.w2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = Dropout(dropout)

    def activation(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(self.dropout(self.activation(self.w1(x))))


@FFN.register(ReLUFFNSpec)
class ReLUFFN(_TwoLayerFFN):
    def __init__(self, spec: ReLUFFNSpec, *, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__(spec, d_model=d_model, d_ff=d_ff, dropout=dropout)

    def activation(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x)  # max(0, ·), §3.3 Eq. 2


@FFN.register(GELUFFNSpec)
class GELUFFN(_TwoLayerFFN):
    def __init__(self, spec: GELUFFNSpec, *, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__(spec, d_model=d_model, d_ff=d_ff, dropout=dropout)

    def activation(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)


@FFN.register(GELUTanhFFNSpec)
class GELUTanhFFN(_TwoLayerFFN):
    def __init__(self, spec: GELUTanhFFNSpec, *, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__(spec, d_model=d_model, d_ff=d_ff, dropout=dropout)

    def activation(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")


@FFN.register(SiLUFFNSpec)
class SiLUFFN(_TwoLayerFFN):
    def __init__(self, spec: SiLUFFNSpec, *, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__(spec, d_model=d_model, d_ff=d_ff, dropout=dropout)

    def activation(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(x)  # x·σ(x)


@FFN.register(SwiGLUFFNSpec)
class SwiGLUFFN(nn.Module):
    def __init__(self, spec: SwiGLUFFNSpec, *, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.v = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)
        self.dropout = Dropout(dropout)

    def gate(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(self.dropout(self.gate(self.w1(x)) * self.v(x)))


@FFN.register(GEGLUFFNSpec)
class GEGLUFFN(SwiGLUFFN):
    def __init__(self, spec: GEGLUFFNSpec, *, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__(SwiGLUFFNSpec(), d_model=d_model, d_ff=d_ff, dropout=dropout)

    def gate(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")  # T5 v1.1's gelu_new

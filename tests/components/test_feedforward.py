"""Position-wise feed-forward blocks against their formulas (§3.3 Eq. 2, GELU, SiLU, SwiGLU)."""

from __future__ import annotations

import math

import torch

from tbuild.components.feedforward import (
    GELUFFN,
    GELUFFNSpec,
    GELUTanhFFN,
    GELUTanhFFNSpec,
    ReLUFFN,
    ReLUFFNSpec,
    SiLUFFN,
    SiLUFFNSpec,
    SwiGLUFFN,
    SwiGLUFFNSpec,
)


def test_relu_and_gelu_ffn_match_hand_formulas() -> None:
    x = torch.randn(2, 3, 6)
    relu = ReLUFFN(ReLUFFNSpec(), d_model=6, d_ff=10, dropout=0.0)
    w1, b1, w2, b2 = relu.w1.weight, relu.w1.bias, relu.w2.weight, relu.w2.bias
    torch.testing.assert_close(relu(x), torch.clamp(x @ w1.T + b1, min=0) @ w2.T + b2)  # Eq. 2
    gelu = GELUFFN(GELUFFNSpec(), d_model=6, d_ff=10, dropout=0.0)
    w1, b1, w2, b2 = gelu.w1.weight, gelu.w1.bias, gelu.w2.weight, gelu.w2.bias
    a = x @ w1.T + b1
    torch.testing.assert_close(gelu(x), 0.5 * a * (1 + torch.erf(a / math.sqrt(2))) @ w2.T + b2)  # x·Φ(x)


def test_silu_ffn_matches_its_formula() -> None:
    """Marian's swish FFN: (a·σ(a))W2 + b2 with a = xW1 + b1 (Ramachandran et al. 2017)."""
    ffn = SiLUFFN(SiLUFFNSpec(), d_model=6, d_ff=10, dropout=0.0)
    x = torch.randn(2, 3, 6)
    a = x @ ffn.w1.weight.T + ffn.w1.bias
    torch.testing.assert_close(ffn(x), (a * torch.sigmoid(a)) @ ffn.w2.weight.T + ffn.w2.bias)


def test_gelu_tanh_ffn_matches_its_formula() -> None:
    """GPT-2's gelu_new: 0.5·a·(1 + tanh(√(2/π)·(a + 0.044715·a³))) with a = xW1 + b1."""
    ffn = GELUTanhFFN(GELUTanhFFNSpec(), d_model=6, d_ff=10, dropout=0.0)
    x = torch.randn(2, 3, 6)
    a = x @ ffn.w1.weight.T + ffn.w1.bias
    act = 0.5 * a * (1 + torch.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a**3)))
    torch.testing.assert_close(ffn(x), act @ ffn.w2.weight.T + ffn.w2.bias)


def test_swiglu_matches_hand_formula_and_parameter_count() -> None:
    ffn = SwiGLUFFN(SwiGLUFFNSpec(), d_model=6, d_ff=10, dropout=0.0)
    x = torch.randn(2, 3, 6)
    a, gate = x @ ffn.w1.weight.T, x @ ffn.v.weight.T
    expected = (a * torch.sigmoid(a) * gate) @ ffn.w2.weight.T  # (Swish_1(xW) ⊗ xV) W2, Shazeer 2020
    torch.testing.assert_close(ffn(x), expected)
    assert sum(p.numel() for p in ffn.parameters()) == 3 * 6 * 10  # no biases

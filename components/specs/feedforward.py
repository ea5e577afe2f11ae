"""Specs of the position-wise feed-forward blocks (``tbuild.components.feedforward``, §3.3)."""

from __future__ import annotations

from typing import Literal

from ..registry import FFN
from ..spec_base import ComponentSpec


@FFN.declare
class ReLUFFNSpec(ComponentSpec):
    """FFN(x) = max(0, xW1 + b1)W2 + b2 (§3.3, Eq. 2); inner size d_ff from the stack."""

    kind: Literal["relu"] = "relu"


@FFN.declare
class GELUFFNSpec(ComponentSpec):
    """As `relu` with the GELU activation (Hendrycks & Gimpel 2016)."""

    kind: Literal["gelu"] = "gelu"


@FFN.declare
class GELUTanhFFNSpec(ComponentSpec):
    """As `gelu` with GELU's tanh approximation 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) (Hendrycks & Gimpel
    2016, §2): GPT-2's `gelu_new`."""

    kind: Literal["gelu_tanh"] = "gelu_tanh"


@FFN.declare
class SiLUFFNSpec(ComponentSpec):
    """As `relu` with the SiLU (swish) activation x·σ(x) (Ramachandran et al. 2017): Marian's `swish`."""

    kind: Literal["silu"] = "silu"


@FFN.declare
class SwiGLUFFNSpec(ComponentSpec):
    """Gated FFN (Shazeer 2020): (SiLU(xW1) * xV)W2, no biases. d_ff is the gated inner width, so
    it has 3·D·d_ff weights; use d_ff ≈ 2/3 of a ReLU FFN's for equal parameters."""

    kind: Literal["swiglu"] = "swiglu"

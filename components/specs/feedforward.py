"""Specs of the position-wise feed-forward blocks (``tbuild.components.feedforward``, §3.3)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from ..registry import FFN
from ..spec_base import ComponentSpec, LateFields

TWO_LAYER = ("relu", "gelu", "gelu_tanh", "silu")  # the kinds with two linear layers and their ``bias`` field


class TwoLayerSpec(LateFields):
    """Base of the two-layer kinds: W2(act(W1 x + b1)) + b2."""

    late: ClassVar[tuple[str, ...]] = ("bias",)

    bias: bool = Field(True, description="Biases b1 and b2 (§3.3, Eq. 2); false: none (T5's DenseReluDense).")


@FFN.declare
class ReLUFFNSpec(TwoLayerSpec):
    """FFN(x) = max(0, xW1 + b1)W2 + b2 (§3.3, Eq. 2); inner size d_ff from the stack."""

    kind: Literal["relu"] = "relu"


@FFN.declare
class GELUFFNSpec(TwoLayerSpec):
    """As `relu` with the GELU activation (Hendrycks & Gimpel 2016)."""

    kind: Literal["gelu"] = "gelu"


@FFN.declare
class GELUTanhFFNSpec(TwoLayerSpec):
    """As `gelu` with GELU's tanh approximation 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) (Hendrycks & Gimpel
    2016, §2): GPT-2's `gelu_new`."""

    kind: Literal["gelu_tanh"] = "gelu_tanh"


@FFN.declare
class SiLUFFNSpec(TwoLayerSpec):
    """As `relu` with the SiLU (swish) activation x·σ(x) (Ramachandran et al. 2017): Marian's `swish`."""

    kind: Literal["silu"] = "silu"


@FFN.declare
class SwiGLUFFNSpec(ComponentSpec):
    """Gated FFN (Shazeer 2020): (SiLU(xW1) * xV)W2, no biases. d_ff is the gated inner width, so
    it has 3·D·d_ff weights; use d_ff ≈ 2/3 of a ReLU FFN's for equal parameters."""

    kind: Literal["swiglu"] = "swiglu"


@FFN.declare
class GEGLUFFNSpec(ComponentSpec):
    """Gated FFN with GELU (Shazeer 2020, GEGLU) in its tanh approximation: (GELU_tanh(xW1) * xV)W2, no biases;
    T5 v1.1's and Flan-T5's ``gated-gelu`` (transformers' gelu_new). Like swiglu, d_ff is the gated inner width."""

    kind: Literal["geglu"] = "geglu"

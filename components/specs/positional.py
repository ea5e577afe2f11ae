"""Specs of the positional schemes (``tbuild.components.positional``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from ..registry import POSITIONAL
from ..spec_base import ComponentSpec, StrictModel, Use


@POSITIONAL.declare
class SinusoidalSpec(ComponentSpec):
    """Fixed sine/cosine encodings added to the embeddings (§3.5); extend to any length."""

    kind: Literal["sinusoidal"] = "sinusoidal"


@POSITIONAL.declare
class LearnedSpec(ComponentSpec):
    """Learned absolute position embeddings (Table 3 row E); needs model.max_positions."""

    kind: Literal["learned"] = "learned"

    def check(self, uses: Sequence[Use]) -> None:
        if any(use.max_positions is None for use in uses):
            raise ValueError("learned positions need model.max_positions (the longest sequence, e.g. 256)")


@POSITIONAL.declare
class NoPositionSpec(ComponentSpec):
    """No position information at all (a bag-of-words baseline; causal decoders still see order)."""

    kind: Literal["none"] = "none"


@POSITIONAL.declare
class RotarySpec(ComponentSpec):
    """Rotary position embedding (Su et al. 2021, §3.4): in every self-attention layer the pair of
    query/key dimensions (2i, 2i+1) at position m is rotated by the angle m·θ_i, θ_i = base^(-2i/d_k).
    Rotations preserve norms and R(m)ᵀR(n) = R(n-m), so q·k depends on the relative offset only.
    Needs an even d_k; nothing is added to the embeddings and cross-attention is not rotated."""

    kind: Literal["rope"] = "rope"
    base: float = Field(10000.0, gt=1, description="Base of the geometric angle progression θ_i.")
    scaling: RopeScalingSpec | None = Field(
        None, description="Llama 3's rescaling of the θ_i for longer inputs, e.g. {kind: llama3, factor: 8}; "
        "none by default.")


class RopeScalingSpec(StrictModel):
    """Llama 3.1's frequency scaling (transformers' ``rope_type: llama3``): with wavelength λ_i = 2π/θ_i and
    L = original_max_positions, θ_i is kept where λ_i < L/high_freq_factor, divided by ``factor`` where
    λ_i > L/low_freq_factor, and in between interpolated, (1 - s)·θ_i/factor + s·θ_i with
    s = (L/λ_i - low_freq_factor)/(high_freq_factor - low_freq_factor)."""

    kind: Literal["llama3"] = "llama3"
    factor: float = Field(gt=1, description="How much the low frequencies are slowed.")
    low_freq_factor: float = Field(1.0, gt=0, description="Wavelengths above L/low_freq_factor: θ_i/factor.")
    high_freq_factor: float = Field(4.0, gt=0, description="Wavelengths below L/high_freq_factor: θ_i kept.")
    original_max_positions: int = Field(8192, ge=1, description="L: the context length the model was trained at.")


@POSITIONAL.declare
class ALiBiSpec(ComponentSpec):
    """Attention with linear biases (Press et al. 2021, §3): head h adds -m_h·|i-j| to its
    self-attention logits, slopes m_h = 2^(-8h/H) for h = 1..H (their geometric sequence; for H not a
    power of two this formula is used as is, not their interpolation). No embeddings are added.
    Press et al. define the causal case (j ≤ i, so |i-j| = i-j); encoder self-attention uses the
    same symmetric distance |i-j| in both directions, so an encoder sees distance but not direction
    (direction still reaches the decoder through causality). Cross-attention gets no bias."""

    kind: Literal["alibi"] = "alibi"


@POSITIONAL.declare
class BucketedSpec(ComponentSpec):
    """T5's relative position bias (Raffel et al. 2020, §2.1): each head adds a learned scalar b_h(bucket(j-i))
    to its self-attention logits, one table of ``buckets`` rows per stack (computed once for the stack and shared
    by its layers, as T5's first layer computes it for the others). Distances below ``buckets/2`` (a quarter in
    an encoder) have a bucket each, longer ones share buckets logarithmically up to ``max_distance``, beyond which
    all fall in the last. The encoder's buckets are bidirectional (half for keys after the query), the causal
    decoder's read how far back the key is. Nothing is added to the embeddings; cross-attention gets no bias."""

    kind: Literal["bucketed"] = "bucketed"
    buckets: int = Field(32, ge=4, description="Rows of the bias table: T5's relative_attention_num_buckets (32).")
    max_distance: int = Field(128, ge=2, description="Distances from here on share the last bucket: T5's "
                              "relative_attention_max_distance (128).")

    def check(self, uses: Sequence[Use]) -> None:
        if self.max_distance <= self.buckets // 2:
            raise ValueError(f"bucketed max_distance ({self.max_distance}) must exceed buckets/2 "
                             f"({self.buckets // 2}), where the logarithmic buckets begin")

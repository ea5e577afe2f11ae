"""Specs of the normalisation blocks (``tbuild.components.norm``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..registry import NORM
from ..spec_base import ComponentSpec


@NORM.declare
class LayerNormSpec(ComponentSpec):
    """Layer normalisation (Ba et al. 2016), as in the paper's sub-layers (§3.1)."""

    kind: Literal["layernorm"] = "layernorm"
    eps: float = Field(1e-6, gt=0, description="Added to the variance; 1e-6 as in tensor2tensor.")


@NORM.declare
class RMSNormSpec(ComponentSpec):
    """Root-mean-square normalisation (Zhang & Sennrich 2019): no mean subtraction, no bias."""

    kind: Literal["rmsnorm"] = "rmsnorm"
    eps: float = Field(1e-6, gt=0, description="Added to the mean square.")

"""Specs of the output heads of an encoder-only model (``model.head``; blocks in ``tbuild.components.heads``).
Torch-free. A head maps the final encoder states to scores over a label set read from the data."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from ..registry import HEAD
from ..spec_base import ComponentSpec


@HEAD.declare
class TokenClassificationSpec(ComponentSpec):
    """One label per input position: a linear layer from d_model to the label set (a tagger's tags).
    ``labels: from_data`` is fitted to the training split's labels when a run starts (its spec.yaml then
    lists them, sorted), as ``vocab_size: from_tokenizer`` is fitted to the tokenizer."""

    kind: Literal["token_classification"] = "token_classification"
    labels: Literal["from_data"] | list[str] = Field(
        "from_data", description="The label set: from_data (the training split's labels, sorted) or the labels "
        "themselves (a fitted run's spec lists them; an evaluation label outside them is an error).")
    bias: bool = Field(True, description="A bias per label.")

    @field_validator("labels")
    @classmethod
    def _distinct(cls, v: str | list[str]) -> str | list[str]:
        if isinstance(v, list):
            if len(v) < 2:
                raise ValueError("a classification head needs at least 2 labels")
            if len(set(v)) != len(v):
                raise ValueError("labels must be distinct")
        return v

    def label_count(self) -> int:
        """The number of labels (the head's outputs); the spec must be fitted to its data first."""
        if not isinstance(self.labels, list):
            raise RuntimeError("model.head.labels is from_data: fit the spec to its data first (tbuild train does)")
        return len(self.labels)

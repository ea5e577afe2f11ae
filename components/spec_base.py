"""The pydantic base shared by every spec model (strict: unknown keys are errors, documented) and
``Use``, where a component sits in a model, which its cross-field checks look at. Torch-free."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer


class StrictModel(BaseModel):
    """Unknown keys are errors: by default pydantic ignores them without a word."""

    model_config = ConfigDict(extra="forbid", validate_default=True, use_attribute_docstrings=True)


@dataclass(frozen=True)
class Use:
    """One place a component spec is used, with the dimensions it gets there.

    ``stack``: "encoder" or "decoder"; ``role``: "self" or "cross" (attention), "ffn", "norm"
    (a sub-layer's norm), "final_norm" (after the stack), "positional" (its embeddings), "char_input"
    (the encoder's input embedding) or "pointer" (the decoder's pointer into the source);
    ``causal``: decoder self-attention; ``max_positions``: model.max_positions."""

    stack: str
    role: str
    heads: int
    d_k: int
    d_v: int
    d_ff: int
    causal: bool
    max_positions: int | None


class ComponentSpec(StrictModel):
    """Base of every variant's spec. ``kind`` is a ``Literal`` equal to the registry key."""

    kind: str

    def check(self, uses: Sequence[Use]) -> None:
        """Cross-field checks against where the spec is used; raise ``ValueError`` to refuse."""


class LateFields(ComponentSpec):
    """A component spec whose ``late`` fields joined it after specs were written: dumped only where they differ
    from their defaults, so those specs keep their resolved form (spec.yaml) and architecture hash."""

    late: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _without_late_defaults(self, handler: SerializerFunctionWrapHandler) -> dict:
        data = handler(self)
        for name in self.late:
            if name in data and data[name] == type(self).model_fields[name].default:
                del data[name]
        return data

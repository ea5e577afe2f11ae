"""The pydantic base shared by every spec model: strict (unknown keys are errors) and documented."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Unknown keys are errors: pydantic silently ignores them by default."""

    model_config = ConfigDict(extra="forbid", validate_default=True, use_attribute_docstrings=True)


class ComponentSpec(StrictModel):
    """Base of every variant's spec. ``kind`` is a ``Literal`` equal to the registry key."""

    kind: str

    def check(self, model: Any) -> None:
        """Cross-field checks against the enclosing model spec; raise ``ValueError`` to refuse."""

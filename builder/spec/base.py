"""What every section of the spec shares: the error that names the field at fault."""

from __future__ import annotations

from ..resolved import SpecPath


class FieldError(ValueError):
    """A cross-field error that knows which field (path below the validated model) is at fault."""

    def __init__(self, path: SpecPath, message: str) -> None:
        super().__init__(message)
        self.path = path

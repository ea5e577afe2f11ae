"""What every section of the spec shares: a field's path, and the error that names the field at fault."""

from __future__ import annotations

SpecPath = tuple[str | int, ...]  # a field's place below the validated model: ("encoder", "groups", 0, "ffn")


class FieldError(ValueError):
    """A cross-field error that knows which field (path below the validated model) is at fault."""

    def __init__(self, path: SpecPath, message: str) -> None:
        super().__init__(message)
        self.path = path

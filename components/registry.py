"""One small registry helper; one registry per component kind (attention, positional, ffn, norm).

A block registers itself with the pydantic model of its spec; the registry key is the spec's
``kind`` literal, so spec tags and registry keys cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, get_args

from pydantic import BaseModel


@dataclass(frozen=True)
class Entry:
    """A registered variant: its key, spec model and the block class that implements it."""

    key: str
    spec: type[BaseModel]
    block: type
    origin: str  # "tbuild" or the plugin's distribution/entry point name


class Registry:
    """Maps spec ``kind`` tags to the blocks that implement them. Duplicate keys are refused."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._entries: dict[str, Entry] = {}

    def register(self, spec: type[BaseModel], *, origin: str = "tbuild") -> Callable[[type], type]:
        """Class decorator: ``@ATTENTION.register(MultiHeadAttentionSpec)``."""
        key = spec_kind(spec)

        def decorate(block: type) -> type:
            if key in self._entries:
                raise ValueError(f"{self.name} kind {key!r} is already registered by {self._entries[key].origin}")
            self._entries[key] = Entry(key, spec, block, origin)
            return block

        return decorate

    def __getitem__(self, key: str) -> Entry:
        try:
            return self._entries[key]
        except KeyError:
            raise KeyError(f"unknown {self.name} kind {key!r}; registered: {', '.join(self)}") from None

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[Entry]:
        return list(self._entries.values())

    def build(self, spec: BaseModel, **shared: Any) -> Any:
        """Instantiate the block registered for ``spec.kind`` with the shared dimensions."""
        return self[spec.kind].block(spec, **shared)  # type: ignore[attr-defined]


def spec_kind(spec: type[BaseModel]) -> str:
    """The single ``Literal`` value of a spec model's ``kind`` field."""
    field = spec.model_fields.get("kind")
    args = get_args(field.annotation) if field is not None else ()
    if len(args) != 1 or not isinstance(args[0], str):
        raise TypeError(f"{spec.__name__} needs a field kind: Literal['<key>']")
    return args[0]


ATTENTION = Registry("attention")
POSITIONAL = Registry("positional")
FFN = Registry("ffn")
NORM = Registry("norm")
REGISTRIES: dict[str, Registry] = {r.name: r for r in (ATTENTION, POSITIONAL, FFN, NORM)}

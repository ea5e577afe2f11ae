"""One small registry helper; one registry per component kind (attention, positional, ffn, norm, pointer,
head, char_input).

A registry maps each ``kind`` tag to the pydantic model of its spec and, separately, to the block
that implements it. Specs are declared in torch-free modules (``tbuild.components.specs``), blocks
bind to them when their (torch) module is imported, so the spec schema never needs torch. A
third-party block does both at once: ``@FFN.register(MySpec)`` declares the spec if it is new and
binds the block. The registry key is the spec's ``kind`` literal, so tags and keys cannot drift.

``registry.field()`` is the annotation of a spec field holding one of the registered kinds: a
discriminated union on ``kind`` resolved at validation time from the registry's current contents,
so a kind registered after the schema was imported is valid at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar, Union, get_args

from pydantic import BaseModel, Field, TypeAdapter
from pydantic_core import core_schema

from .plugins import load_plugins

T = TypeVar("T", bound=type)
S = TypeVar("S", bound=type[BaseModel])


@dataclass(frozen=True)
class Entry:
    """A registered variant: its key, spec model, the block class (None until its module is
    imported) and where it came from."""

    key: str
    spec: type[BaseModel]
    block: type | None
    origin: str  # "tbuild" or the plugin's distribution/entry point name


class Registry:
    """Maps spec ``kind`` tags to spec models and the blocks that implement them. Duplicate keys are
    refused. ``plugins``: whether listing the kinds first loads the entry-point plugins; ``before``: what else
    listing them calls first (the data sets': loading the tasks' declarations, which may declare one)."""

    def __init__(self, name: str, *, plugins: bool = True, before: Callable[[], object] | None = None) -> None:
        self.name = name
        self.plugins = plugins
        self.before = before
        self._specs: dict[str, tuple[type[BaseModel], str]] = {}
        self._blocks: dict[str, type] = {}
        self.generation = 0  # bumped by every declaration; invalidates cached unions
        self.base: type[BaseModel] | None = None  # what every spec must subclass (``require``)

    def require(self, base: type[BaseModel]) -> None:
        """Refuse, from now on, a spec that does not subclass ``base`` (a head's ``HeadBase``: what the builder
        and the tasks ask every head)."""
        self.base = base
        for spec, origin in self._specs.values():
            self._check(spec, origin)

    def _check(self, spec: type[BaseModel], origin: str) -> None:
        if self.base is not None and not issubclass(spec, self.base):
            raise TypeError(f"{self.name} kind {spec_kind(spec)!r} ({origin}): {spec.__name__} must subclass "
                            f"{self.base.__module__}.{self.base.__name__}, which answers what every {self.name} "
                            "is asked")

    def declare(self, spec: S, *, origin: str = "tbuild") -> S:
        """Declare a spec model (no block yet); usable as a class decorator."""
        key = spec_kind(spec)
        if key in self._specs:
            raise ValueError(f"{self.name} kind {key!r} is already registered by {self._specs[key][1]}")
        self._check(spec, origin)
        self._specs[key] = (spec, origin)
        self.generation += 1
        return spec

    def register(self, spec: type[BaseModel], *, origin: str = "tbuild") -> Callable[[T], T]:
        """Class decorator binding a block to ``spec`` (declared here if new):
        ``@ATTENTION.register(MultiHeadSpec)``."""
        key = spec_kind(spec)

        def decorate(block: T) -> T:
            declared = self._specs.get(key)
            if key in self._blocks or (declared is not None and declared[0] is not spec):
                owner = declared[1] if declared is not None else "?"
                raise ValueError(f"{self.name} kind {key!r} is already registered by {owner}")
            if declared is None:
                self.declare(spec, origin=origin)
            self._blocks[key] = block
            return block

        return decorate

    def _all(self) -> dict[str, tuple[type[BaseModel], str]]:
        if self.plugins:
            load_plugins()  # once per process, on first need (never at import)
        if self.before is not None:
            self.before()
        return self._specs

    def __getitem__(self, key: str) -> Entry:
        specs = self._all()
        if key not in specs:
            raise KeyError(f"unknown {self.name} kind {key!r}; registered: {', '.join(self)}")
        spec, origin = specs[key]
        return Entry(key, spec, self._blocks.get(key), origin)

    def __contains__(self, key: object) -> bool:
        return key in self._all()

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._all()))

    def __len__(self) -> int:
        return len(self._all())

    def entries(self) -> list[Entry]:
        return [self[key] for key in self]

    def build(self, spec: BaseModel, **shared: Any) -> Any:
        """Instantiate the block registered for ``spec.kind`` with the shared dimensions."""
        entry = self[spec.kind]  # type: ignore[attr-defined]
        if entry.block is None:
            raise LookupError(f"{self.name} kind {entry.key!r} has a spec but no block: import the module "
                              f"that registers its block (tbuild.builder.build imports the built-in ones)")
        return entry.block(spec, **shared)

    def field(self, base: type[BaseModel], *, shorthand: bool = False) -> Any:
        """The annotation of a spec field holding any registered kind (see ``Kinds``)."""
        return Annotated[base, Kinds(self, shorthand=shorthand)]


class Kinds:
    """pydantic annotation: a discriminated union on ``kind`` over a registry's specs, built when a
    value is validated (cached per registry generation), so late registrations join the schema.
    pydantic merges the union's errors into the enclosing model's exactly as for a static union.
    ``shorthand``: a bare string ``x`` means ``{kind: x}``."""

    def __init__(self, registry: Registry, *, shorthand: bool = False) -> None:
        self.registry = registry
        self.shorthand = shorthand
        self._cache: tuple[int, TypeAdapter] | None = None

    def adapter(self) -> TypeAdapter:
        specs = tuple(e.spec for e in self.registry.entries())  # loads plugins first
        if self._cache is None or self._cache[0] != self.registry.generation:
            # Union of one type is that type; pydantic still treats it as a one-member tagged union.
            union = Union[specs]  # noqa: UP007 - built at run time
            self._cache = (self.registry.generation, TypeAdapter(Annotated[union, Field(discriminator="kind")]))
        return self._cache[1]

    def validate(self, value: Any) -> Any:
        if self.shorthand and isinstance(value, str):
            value = {"kind": value}
        return self.adapter().validate_python(value)

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        serialize = core_schema.plain_serializer_function_ser_schema(_dump, info_arg=True)
        return core_schema.no_info_plain_validator_function(self.validate, serialization=serialize)

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> dict[str, Any]:
        union = handler(self.adapter().core_schema)
        if not self.shorthand:
            return union
        return {"anyOf": [union, {"type": "string", "enum": list(self.registry)}]}


def _dump(value: BaseModel, info: Any) -> Any:
    return value.model_dump(mode=info.mode, by_alias=info.by_alias, exclude_unset=info.exclude_unset,
                            exclude_defaults=info.exclude_defaults, exclude_none=info.exclude_none)


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
POINTER = Registry("pointer")  # the decoder's pointer into the source (model.decoder.pointer)
HEAD = Registry("head")  # an encoder-only model's output head (model.head)
CHAR_INPUT = Registry("char_input")  # each input piece's characters pooled into its embedding (model.char_input)
REGISTRIES: dict[str, Registry] = {r.name: r for r in (ATTENTION, POSITIONAL, FFN, NORM, POINTER, HEAD, CHAR_INPUT)}

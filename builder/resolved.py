"""One resolved view of a model spec: the blocks each layer group really uses (``group.x or
stack.x or model.x``), the final norms, the stacks' dimensions, and for each component spec where it
is declared and where it is used. The builder, ``inspect`` and the spec checks all read this view;
nothing else resolves defaults. Torch-free."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tbuild.components.spec_base import ComponentSpec, Use
from tbuild.components.specs.order import Layout, layout

if TYPE_CHECKING:  # for annotations only: the spec package imports this module (spec/whole.py's block checks)
    from .spec.base import SpecPath
    from .spec.model import ModelSpec, StackSpec


@dataclass(frozen=True)
class ResolvedGroup:
    """A run of ``repeat`` identical layers and the blocks they use."""

    repeat: int
    attention: ComponentSpec
    ffn: ComponentSpec
    norm: ComponentSpec
    cross_attention: ComponentSpec | None  # decoder layers only
    layout: Layout  # the blocks of each layer in order (``order``: group's, else stack's; default standard)


@dataclass(frozen=True)
class ResolvedStack:
    """An encoder or decoder stack (§3.1) with its dimensions filled in."""

    name: str  # "encoder" or "decoder"
    heads: int
    d_k: int
    d_v: int
    d_ff: int
    groups: tuple[ResolvedGroup, ...]
    final_norm: ComponentSpec | None  # after the last layer (pre-norm stacks by default)
    max_positions: int | None
    prefix: bool = False  # a prefix LM's decoder (model.prefix_lm.attention prefix): its mask comes per batch

    @property
    def causal(self) -> bool:
        """Masked decoder self-attention (§3.2.3); a prefix LM's decoder is built unmasked and gets each
        batch's prefix mask instead (bidirectional over the source, causal over the target)."""
        return self.name == "decoder" and not self.prefix

    def use(self, role: str) -> Use:
        """The use of a component in this stack in ``role`` (see ``Use``)."""
        causal = self.causal and role == "self"
        return Use(self.name, role, self.heads, self.d_k, self.d_v, self.d_ff, causal, self.max_positions)


@dataclass(frozen=True)
class ResolvedComponent:
    """A component spec, the path where the spec declares it and every place it is used."""

    path: SpecPath
    spec: ComponentSpec
    uses: tuple[Use, ...]


@dataclass(frozen=True)
class ResolvedModel:
    stacks: tuple[ResolvedStack, ...]  # the kind's stacks, input side first (components/specs/graph.py)
    positional: ComponentSpec
    components: tuple[ResolvedComponent, ...]  # in declaration order: model, stacks, groups

    def stack(self, name: str) -> ResolvedStack | None:
        return next((s for s in self.stacks if s.name == name), None)

    @property
    def encoder(self) -> ResolvedStack | None:
        return self.stack("encoder")

    @property
    def decoder(self) -> ResolvedStack | None:
        return self.stack("decoder")


def resolve(model: ModelSpec) -> ResolvedModel:
    """The resolved view of a validated ``ModelSpec`` (d_k/d_v already filled in)."""
    cross = model.graph.cross_attention
    stacks = tuple(_stack(model, spec, name, cross) for name, spec in model.stacks().items())
    uses: dict[int, list[Use]] = {}

    def used(spec: ComponentSpec | None, use: Use) -> None:
        if spec is not None and use not in uses.setdefault(id(spec), []):
            uses[id(spec)].append(use)

    for stack in stacks:
        used(model.positional, stack.use("positional"))  # each stack's embeddings
        for group in stack.groups:
            used(group.attention, stack.use("self"))
            used(group.cross_attention, stack.use("cross"))
            used(group.ffn, stack.use("ffn"))
            used(group.norm, stack.use("norm"))
        used(stack.final_norm, stack.use("final_norm"))
        if stack.name == "encoder":
            used(model.char_input, stack.use("char_input"))  # the encoder's input embedding
        used(getattr(model.stacks()[stack.name], "pointer", None), stack.use("pointer"))  # decoder only
    components = tuple(ResolvedComponent(path, spec, tuple(uses.get(id(spec), ())))
                       for path, spec in _declared(model, cross))
    return ResolvedModel(stacks, model.positional, components)


def _stack(model: ModelSpec, stack: StackSpec, name: str, cross_attention: bool) -> ResolvedStack:
    """``name``'s stack; its layers attend to an encoder (decoder layers of a kind with cross-attention)."""
    attends = cross_attention and name == "decoder"
    cross = (getattr(stack, "cross_attention", None) or model.cross_attention) if attends else None
    groups = tuple(
        ResolvedGroup(repeat=g.repeat, attention=g.attention or stack.attention or model.attention,
                      ffn=g.ffn or stack.ffn or model.ffn, norm=g.norm or stack.norm or model.norm,
                      cross_attention=cross, layout=layout(g.order or stack.order, attends))
        for g in stack.layer_groups())
    final = model.norm_placement == "pre" if model.final_norm is None else model.final_norm
    assert stack.d_k is not None and stack.d_v is not None  # filled in by ModelSpec validation
    prefix = name == "decoder" and model.prefix is not None and model.prefix[0] == "prefix"
    return ResolvedStack(name, stack.heads, stack.d_k, stack.d_v, stack.d_ff, groups,
                         (stack.norm or model.norm) if final else None, model.max_positions, prefix)


def _declared(model: ModelSpec, cross_attention: bool) -> list[tuple[SpecPath, ComponentSpec]]:
    """Every component spec the model spec sets (or defaults), with its path (the default cross-attention
    only for a kind that has cross-attention)."""
    found: list[tuple[SpecPath, ComponentSpec]] = []
    for name in ("attention", "cross_attention", "positional", "ffn", "norm"):
        if name != "cross_attention" or cross_attention:
            found.append(((name,), getattr(model, name)))
    if model.char_input is not None:
        found.append((("char_input",), model.char_input))
    for stack_name, stack in model.stacks().items():
        for name in ("attention", "ffn", "norm", "cross_attention", "pointer"):
            if getattr(stack, name, None) is not None:
                found.append(((stack_name, name), getattr(stack, name)))
        for i, group in enumerate(stack.groups or []):
            for name in ("attention", "ffn", "norm"):
                if getattr(group, name) is not None:
                    found.append(((stack_name, "groups", i, name), getattr(group, name)))
    return found

"""What each export target can represent, keyed by the registries' ``kind`` strings, and the one
check that refuses everything else (so a newly registered kind is refused, never mis-exported)."""

from __future__ import annotations

from dataclasses import dataclass

from tbuild.builder.resolved import ResolvedStack, resolve
from tbuild.builder.schema import Spec

from ..errors import TbuildError


class UnsupportedExport(TbuildError):
    """The model uses something the target cannot represent (one line: what, which target, what it
    supports). The CLI exits with code 2, as for an invalid spec."""


@dataclass(frozen=True)
class Target:
    name: str
    kinds: dict[str, frozenset[str]]  # registry name -> the kinds this target represents
    notes: str  # what else it needs, for the refusal line


CTRANSLATE2 = Target(
    name="ctranslate2",
    kinds={
        "attention": frozenset({"multihead"}),
        # rope, alibi: CTranslate2 rotates/biases in its own layout (alibi: decoder-only models);
        # not mapped in this slice. sinusoidal/none are written as explicit position tables.
        "positional": frozenset({"sinusoidal", "learned", "none"}),
        "ffn": frozenset({"relu", "gelu", "swiglu"}),
        "norm": frozenset({"layernorm", "rmsnorm"}),
    },
    notes="one norm kind and eps for the whole model, one FFN kind per stack, d_k = d_v",
)

TARGETS = {t.name: t for t in (CTRANSLATE2,)}


def _supports(target: Target, registry: str) -> str:
    return f"{target.name} supports {registry}: {', '.join(sorted(target.kinds[registry]))}"


def check_exportable(spec: Spec, target: Target) -> None:
    """Raise ``UnsupportedExport`` naming the first thing ``target`` cannot represent."""
    model = spec.model
    view = resolve(model)

    def refuse(what: str, registry: str | None = None) -> None:
        tail = _supports(target, registry) if registry else f"{target.name} needs {target.notes}"
        raise UnsupportedExport(f"cannot export to {target.name}: {what}; {tail}")

    def kind(registry: str, component: object, where: str) -> None:
        name = getattr(component, "kind", type(component).__name__)
        if name not in target.kinds[registry]:
            refuse(f"{registry} kind {name!r} ({where})", registry)

    kind("positional", view.positional, "model.positional")
    for stack in view.stacks:
        for i, group in enumerate(stack.groups):
            where = f"{stack.name} layer group {i}"
            kind("attention", group.attention, f"{where} self-attention")
            if group.cross_attention is not None:
                kind("attention", group.cross_attention, f"{where} cross-attention")
            kind("ffn", group.ffn, where)
            kind("norm", group.norm, where)
        if stack.final_norm is not None:
            kind("norm", stack.final_norm, f"{stack.name} final norm")
        _check_stack(stack, model.norm_placement, refuse)
    norms = {(n.kind, n.eps) for s in view.stacks for n in _norms(s)}  # type: ignore[attr-defined]
    if len(norms) > 1:
        refuse(f"norms differ ({', '.join(f'{k} eps {e:g}' for k, e in sorted(norms))})")


def export_targets(spec: Spec) -> dict[str, str | None]:
    """For every target: None if ``spec`` can be exported to it, else the one-line reason it cannot.
    Torch-free, so ``validate`` and ``inspect`` can say it before any training."""
    verdicts: dict[str, str | None] = {}
    for name, target in TARGETS.items():
        try:
            check_exportable(spec, target)
            verdicts[name] = None
        except UnsupportedExport as e:
            verdicts[name] = str(e)
    return verdicts


def describe_targets(spec: Spec) -> list[str]:
    """One line per target: ``ctranslate2: yes`` or ``ctranslate2: no (why)``."""
    return [f"{name}: yes" if why is None else f"{name}: no ({why})" for name, why in export_targets(spec).items()]


def _norms(stack: ResolvedStack) -> list[object]:
    return [g.norm for g in stack.groups] + ([stack.final_norm] if stack.final_norm is not None else [])


def _check_stack(stack: ResolvedStack, placement: str, refuse) -> None:  # noqa: ANN001 - the closure above
    if stack.d_k != stack.d_v:
        refuse(f"{stack.name} d_k ({stack.d_k}) differs from d_v ({stack.d_v})")
    if placement == "post" and stack.final_norm is not None:
        refuse(f"{stack.name} has a final norm after post-norm layers (final_norm: true)")
    if len({g.ffn.kind for g in stack.groups}) > 1:  # type: ignore[attr-defined]
        refuse(f"{stack.name} mixes FFN kinds")
    attentions = [g.attention for g in stack.groups] + [g.cross_attention for g in stack.groups
                                                         if g.cross_attention is not None]
    kv = {a.kv_heads or stack.heads for a in attentions}  # type: ignore[attr-defined]
    if len(kv) > 1:
        refuse(f"{stack.name} attentions use different kv_heads ({', '.join(map(str, sorted(kv)))})")

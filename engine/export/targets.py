"""What each export target can represent, keyed by the registries' ``kind`` strings, and the one
check that refuses everything else (so a newly registered kind is refused, never mis-exported); and
which decode profiles each target's runtime can honour."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tbuild.builder.resolved import ResolvedModel, ResolvedStack, resolve
from tbuild.builder.schema import DecodeSpec, Spec
from tbuild.components.specs.graph import GRAPHS

from ..decoding.request import DecodeRequest, runtime_lacks, unsupported
from ..errors import TbuildError
from .graph_targets import check_graph


class UnsupportedExport(TbuildError):
    """The model uses something the target cannot represent (one line: what, which target, what it
    supports). The CLI exits with code 2, as for an invalid spec."""


Refuse = Callable[[str], None]


@dataclass(frozen=True)
class Target:
    name: str
    kinds: dict[str, frozenset[str]]  # registry name -> the kinds this target represents
    notes: str  # what else it needs, for the refusal line
    # The target's structural limits beyond kinds: (spec, resolved view, refuse) -> None.
    check: Callable[[Spec, ResolvedModel, Refuse], None]


def _ct2_structure(spec: Spec, view: ResolvedModel, refuse: Refuse) -> None:
    for stack in view.stacks:
        _check_stack(stack, spec.model.norm_placement, refuse)
    norms = {(n.kind, n.eps) for s in view.stacks for n in _norms(s)}  # type: ignore[attr-defined]
    if len(norms) > 1:
        refuse(f"norms differ ({', '.join(f'{k} eps {e:g}' for k, e in sorted(norms))})")


MARIAN_LAYER_NORM_EPS = 1e-5  # MarianMTModel's nn.LayerNorm default; its config has no field for it


def _hf_structure(spec: Spec, view: ResolvedModel, refuse: Refuse) -> None:
    """MarianMTModel: post-norm layers, no final norms, one activation, d_model/heads-wide heads,
    every head its own K/V, LayerNorm eps fixed at 1e-5."""
    model = spec.model
    if model.norm_placement != "post":
        refuse(f"norm_placement {model.norm_placement!r} (MarianMTModel's layers are post-norm)")
    for stack in view.stacks:
        _check_stack(stack, "post", refuse)  # d_k = d_v, no final norm, one FFN kind and kv_heads
        if stack.d_k * stack.heads != model.d_model:
            refuse(f"{stack.name} d_k ({stack.d_k}) · heads ({stack.heads}) differs from d_model ({model.d_model})")
        kv = {a.kv_heads for g in stack.groups for a in (g.attention, g.cross_attention) if a is not None}  # type: ignore[attr-defined]
        if kv - {None, stack.heads}:
            refuse(f"{stack.name} attention shares K/V between heads (kv_heads {min(kv - {None})})")
    if len({g.ffn.kind for s in view.stacks for g in s.groups}) > 1:  # type: ignore[attr-defined]
        refuse("encoder and decoder FFN kinds differ (MarianMTModel has one activation_function)")
    eps = {n.eps for s in view.stacks for n in _norms(s)}  # type: ignore[attr-defined]
    if eps != {MARIAN_LAYER_NORM_EPS}:
        refuse(f"LayerNorm eps {', '.join(f'{e:g}' for e in sorted(eps))} (MarianMTModel's is fixed at 1e-05: "
               "set model.norm={kind: layernorm, eps: 1.0e-5})")


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
    check=_ct2_structure,
)

HF = Target(
    name="hf",  # a Hugging Face transformers MarianMTModel folder (export/hf.py)
    kinds={
        "attention": frozenset({"multihead"}),
        "positional": frozenset({"sinusoidal"}),  # Marian's fixed table; learned/none/rope/alibi: no such option
        "ffn": frozenset({"relu", "gelu"}),  # fc1 -> activation_function -> fc2, both with biases
        "norm": frozenset({"layernorm"}),
    },
    notes="post-norm, LayerNorm eps 1e-5, one FFN kind, d_k = d_v = d_model/heads, kv_heads = heads",
    check=_hf_structure,
)

TARGETS = {t.name: t for t in (CTRANSLATE2, HF)}


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

    if model.char_input is not None:
        raise UnsupportedExport(f"cannot export to {target.name}: model.char_input ({model.char_input.kind}) "
                                f"pools each piece's characters into its embedding, which {target.name} has no place "
                                "for; export a model without a character input")
    if not GRAPHS[model.kind].translates:  # decoder_only, encoder_only: their own classes (graph_targets.py)
        def refuse_graph(what: str) -> None:
            raise UnsupportedExport(f"cannot export {model.kind} to {target.name}: {what}")

        check_graph(spec, view, target.name, refuse_graph)
        return
    if model.decoder.pointer is not None:
        raise UnsupportedExport(f"cannot export to {target.name}: model.decoder.pointer "
                                f"({model.decoder.pointer.kind}) adds the encoder output to the decoder's input, "
                                f"which {target.name} has no place for; export a model without a pointer")
    kind("positional", view.positional, "model.positional")
    for stack in view.stacks:
        for i, group in enumerate(stack.groups):
            where = f"{stack.name} layer group {i}"
            if not group.layout.standard:  # the targets' layers are the paper's: self-attention, (cross,) FFN
                raise UnsupportedExport(f"cannot export to {target.name}: {where} has order "
                                        f"{group.layout.describe()}; {target.name} layers are the paper's "
                                        "(order standard: self-attention, cross-attention, feed-forward)")
            kind("attention", group.attention, f"{where} self-attention")
            if group.cross_attention is not None:
                kind("attention", group.cross_attention, f"{where} cross-attention")
            kind("ffn", group.ffn, where)
            kind("norm", group.norm, where)
        if stack.final_norm is not None:
            kind("norm", stack.final_norm, f"{stack.name} final norm")
    target.check(spec, view, refuse)


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


def _check_stack(stack: ResolvedStack, placement: str, refuse: Refuse) -> None:
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


# Decoding settings an export target's runtime cannot honour: the decoding engines' table
# (decoding/request.py: LACKS, the settings a decode profile can hold) and what an export format itself
# cannot hold, per target.
_EXPORT_LIMITS: dict[str, list[tuple[Callable[[DecodeSpec], bool], str]]] = {
    "ctranslate2": [],
    "hf": [(lambda d: d.quantization == "int8", "quantization int8 (the hf export is float32)")],
}


def _profile_refusal(target: str, settings: DecodeSpec) -> str | None:
    """Why ``target`` cannot honour ``settings`` (None: it can)."""
    why = next((why for test, why in _EXPORT_LIMITS[target] if test(settings)), None)
    lacking = unsupported(target, DecodeRequest.of(settings), kinds=("setting",))
    return why or (lacking.what if lacking is not None else None)


def profile_verdicts(spec: Spec) -> dict[str, dict[str, str | None]]:
    """For every target, for the decode section (``decode``) and each named profile: None if the
    target's runtime honours those settings, else the one-line reason it cannot."""
    profiles = {"decode": spec.decode} | {name: spec.decode.with_profile(name) for name in spec.decode.profiles}
    verdicts: dict[str, dict[str, str | None]] = {}
    for target in _EXPORT_LIMITS:
        why = {name: _profile_refusal(target, settings) for name, settings in profiles.items()}
        verdicts[target] = {name: None if w is None else f"{target} cannot honour decode profile {name!r}: {w}"
                            for name, w in why.items()}
    return verdicts


def describe_profiles(spec: Spec) -> list[str]:
    """One line per target: ``ctranslate2 honours decode profiles: decode, sample`` and the refusals."""
    lines = []
    for target, verdicts in profile_verdicts(spec).items():
        yes = [name for name, why in verdicts.items() if why is None]
        lines.append(f"{target} honours decode profiles: {', '.join(yes) or 'none'}")
        lines.extend(why for why in verdicts.values() if why is not None)
        lacks = runtime_lacks(target)
        if lacks:
            lines.append(f"{target} runtime lacks: {', '.join(lacks)}")
    return lines


def check_profile(spec: Spec, target: str, profile: str) -> None:
    """Raise ``UnsupportedExport`` if ``target`` cannot honour decode profile ``profile``."""
    if profile != "decode" and profile not in spec.decode.profiles:
        known = ", ".join(["decode", *spec.decode.profiles])
        raise TbuildError(f"--profile {profile!r}: no such decode profile (the spec has: {known})")
    why = profile_verdicts(spec)[target][profile]
    if why is not None:
        raise UnsupportedExport(why)

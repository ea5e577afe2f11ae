"""What each export target can represent, keyed by the registries' ``kind`` strings, and the one check that
refuses everything else (a newly registered kind is refused, never mis-exported); which decode profiles it honours."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tbuild.builder.resolved import ResolvedModel, ResolvedStack, resolve
from tbuild.builder.spec import DecodeSpec, Spec
from tbuild.components.specs.feedforward import TWO_LAYER
from tbuild.components.specs.positional import BucketedSpec

from ..decoding.request import DecodeRequest, runtime_lacks, unsupported
from ..errors import TbuildError
from .graph_targets import GRAPH_CLASSES


class UnsupportedExport(TbuildError):
    """The model uses something the target cannot represent (one line; the CLI exits with code 2)."""


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


HF_LAYER_NORM_EPS = 1e-5  # nn.LayerNorm's default, which the BART-family classes keep: no config field for it


def hf_seq2seq_class(spec: Spec) -> str:
    """The key of the Hugging Face class an encoder-decoder exports to (``engine/hf/families.py``): T5's for
    bucketed positions, else by the embedding norm and the norm placement."""
    if isinstance(resolve(spec.model).positional, BucketedSpec):  # type: ignore[attr-defined]
        return "t5"
    post = spec.model.norm_placement == "post"
    if spec.model.embedding_norm:  # BART's layernorm_embedding
        return "bart" if post else "mbart"
    return "marian" if post else "pegasus"


def _unscaled(view: ResolvedModel) -> str | None:
    """Where the model's attention does not divide its scores by √d_k (T5's), or None."""
    return next((f"{s.name} {role}" for s in view.stacks for g in s.groups
                 for role, a in (("self-attention", g.attention), ("cross-attention", g.cross_attention))
                 if getattr(a, "scaled", True) is False), None)


def _hf_structure(spec: Spec, view: ResolvedModel, refuse: Refuse) -> None:
    """The limits every seq2seq class shares, then those of the class ``hf_seq2seq_class`` picks."""
    model = spec.model
    for stack in view.stacks:
        _check_stack(stack, model.norm_placement, refuse)  # d_k = d_v, no final norm after post-norm, one FFN kind
        if stack.d_k * stack.heads != model.d_model and hf_seq2seq_class(spec) != "t5":
            refuse(f"{stack.name} d_k ({stack.d_k}) · heads ({stack.heads}) differs from d_model ({model.d_model})")
        kv = {a.kv_heads for g in stack.groups for a in (g.attention, g.cross_attention) if a is not None}  # type: ignore[attr-defined]
        if kv - {None, stack.heads}:
            refuse(f"{stack.name} attention shares K/V between heads (kv_heads {min(kv - {None})})")
    if len({g.ffn.kind for s in view.stacks for g in s.groups}) > 1:  # type: ignore[attr-defined]
        refuse("encoder and decoder FFN kinds differ (the HF classes have one activation_function)")
    key = hf_seq2seq_class(spec)
    if key == "t5":
        _t5_limits(spec, view, refuse)
        return
    norms = {n.kind for s in view.stacks for n in _norms(s)}  # type: ignore[attr-defined]
    if norms - {"layernorm"}:
        refuse(f"norm kind {min(norms - {'layernorm'})!r} (the BART-family classes, Marian's, Pegasus's, BART's: "
               "layernorm; rmsnorm exports with T5's bucketed positions)")
    ffns = {g.ffn.kind for s in view.stacks for g in s.groups} - set(TWO_LAYER)  # type: ignore[attr-defined]
    if ffns:
        refuse(f"ffn kind {min(ffns)!r} (the BART-family classes, Marian's, Pegasus's, BART's: "
               f"{', '.join(TWO_LAYER)}; gated kinds export with T5's bucketed positions)")
    if key in ("bart", "mbart"):
        _bart_limits(spec, view, refuse)
        return
    (_marian_limits if key == "marian" else _pegasus_limits)(spec, view, refuse)


def _bart_limits(spec: Spec, view: ResolvedModel, refuse: Refuse) -> None:
    """BartForConditionalGeneration and MBartForConditionalGeneration (LayerNorm eps 1e-5: no rescaling here)."""
    positional, tie = view.positional.kind, spec.model.tie_embeddings  # type: ignore[attr-defined]
    if positional != "learned":
        refuse(f"model.positional {positional} (BART's and mBART's positions are a learned table)")
    if tie != "three_way":
        refuse(f"model.tie_embeddings {tie} (BART and mBART share one token table between encoder, decoder and output)")
    eps = _norm_eps(view)
    if any(e != HF_LAYER_NORM_EPS for _, e in eps):
        refuse(f"norm eps {', '.join(f'{p} {e:g}' for p, e in eps)} (BART's and mBART's LayerNorms are 1e-05)")
    if spec.model.norm_placement == "pre" and any(s.final_norm is None for s in view.stacks):
        refuse("model.final_norm false (mBART's pre-norm stacks end with a LayerNorm)")


def _t5_limits(spec: Spec, view: ResolvedModel, refuse: Refuse) -> None:
    """T5ForConditionalGeneration (T5Config has one width, head count, d_ff and eps for both stacks)."""
    m = spec.model
    if m.norm_placement != "pre" or any(s.final_norm is None for s in view.stacks):
        refuse("T5ForConditionalGeneration's layers are pre-norm with a final norm after each stack "
               "(norm_placement: pre, final_norm: true)")
    norms = {(n.kind, n.eps) for s in view.stacks for n in _norms(s)}  # type: ignore[attr-defined]
    if len(norms) > 1 or min(norms)[0] != "rmsnorm":
        refuse(f"norms {', '.join(f'{k} eps {e:g}' for k, e in sorted(norms))} (T5's: one rmsnorm eps)")
    if m.embedding_norm:
        refuse("model.embedding_norm true (T5 has no norm on the embeddings)")
    if m.tie_embeddings == "decoder" or m.scale_embeddings:
        refuse(f"tie_embeddings {m.tie_embeddings}, scale_embeddings {str(m.scale_embeddings).lower()} (T5 shares one "
               "unscaled token table between encoder and decoder: three_way or none, scale_embeddings false)")
    shapes = {(s.heads, s.d_k, s.d_ff) for s in view.stacks}
    if len(shapes) > 1:
        refuse("the encoder and decoder differ in heads, d_k or d_ff (T5Config has one num_heads, d_kv and d_ff)")
    for s in view.stacks:
        for g in s.groups:
            if any(a is not None and a.bias for a in (g.attention, g.cross_attention)):  # type: ignore[attr-defined]
                refuse(f"{s.name} attention bias true (T5's projections have none)")
            if getattr(g.ffn, "bias", False) or g.ffn.kind not in (*TWO_LAYER, "geglu", "swiglu"):  # type: ignore[attr-defined]
                refuse(f"{s.name} ffn {g.ffn.kind}{' with biases' if getattr(g.ffn, 'bias', False) else ''} "  # type: ignore[attr-defined]
                       "(T5's: relu, gelu, gelu_tanh or silu with bias false; geglu; swiglu)")


def _marian_limits(spec: Spec, view: ResolvedModel, refuse: Refuse) -> None:
    """MarianMTModel: the fixed sinusoid (§3.5), rebuilt on load, and LayerNorm eps 1e-5, which export/hf.py
    reaches by rescaling each stack's stream from its first norm on: one eps per stack."""
    positional = view.positional.kind  # type: ignore[attr-defined]
    if positional != "sinusoidal":
        refuse(f"model.positional {positional} (MarianMTModel's positions are a fixed sinusoid; a pre-norm model "
               "exports to PegasusForConditionalGeneration, which stores a position table)")
    for stack in view.stacks:
        eps = {g.norm.eps for g in stack.groups}  # type: ignore[attr-defined]
        if len(eps) > 1:
            refuse(f"{stack.name} layer groups differ in norm eps ({', '.join(f'{e:g}' for e in sorted(eps))}; "
                   "the export rescales one residual stream per stack for one eps)")
        if max(eps) > HF_LAYER_NORM_EPS:  # the first norm's error grows with eps - 1e-5 (export/hf.py)
            refuse(f"model.{stack.name} norm eps {max(eps):g} (above MarianMTModel's 1e-05, the first norm of a "
                   "stack, which the export cannot rescale, would move the logits by more than 1e-4)")


def _pegasus_limits(spec: Spec, view: ResolvedModel, refuse: Refuse) -> None:
    """PegasusForConditionalGeneration (one eps: ``engine/hf/pegasus.py`` rescales the residual stream to reach
    1e-5)."""
    tie = spec.model.tie_embeddings
    if tie != "three_way":
        refuse(f"model.tie_embeddings {tie} (PegasusForConditionalGeneration shares one token table between "
               "encoder, decoder and output: three_way)")
    for stack in view.stacks:
        if stack.final_norm is None:
            refuse(f"model.final_norm false ({stack.name}; PegasusForConditionalGeneration's pre-norm stacks end "
                   "with a LayerNorm)")
    eps = _norm_eps(view)
    if len({e for _, e in eps}) > 1:
        refuse(f"norms differ in eps ({', '.join(f'{p} {e:g}' for p, e in eps)}; the export rescales one "
               "residual stream per model for one eps)")


def _norm_eps(view: ResolvedModel) -> list[tuple[str, float]]:
    """(spec path of the eps, eps) of every norm the model uses: ``model.norm.eps``, ``model.decoder.norm.eps``."""
    return [(".".join(["model", *map(str, c.path), "eps"]), c.spec.eps)  # type: ignore[attr-defined]
            for c in view.components if c.path[-1] == "norm" and c.uses]


CTRANSLATE2 = Target(
    name="ctranslate2",
    kinds={
        "attention": frozenset({"multihead"}),
        # rope, alibi: CTranslate2 rotates/biases in its own layout (alibi: decoder-only models);
        # not mapped in this slice. sinusoidal/none are written as explicit position tables.
        "positional": frozenset({"sinusoidal", "learned", "none"}),
        "ffn": frozenset({"relu", "gelu", "gelu_tanh", "silu", "swiglu"}),
        "norm": frozenset({"layernorm", "rmsnorm"}),
    },
    notes="one norm kind and eps for the whole model, one FFN kind per stack, d_k = d_v",
    check=_ct2_structure,
)

HF = Target(
    name="hf",  # a Hugging Face MarianMTModel or PegasusForConditionalGeneration folder (export/hf.py)
    kinds={
        "attention": frozenset({"multihead"}),
        # Marian: its fixed sinusoid only; Pegasus: a stored table (sinusoidal, learned or none written in it)
        "positional": frozenset({"sinusoidal", "learned", "none", "bucketed"}),  # bucketed: T5ForConditionalGeneration
        "ffn": frozenset({"relu", "gelu", "gelu_tanh", "silu", "geglu", "swiglu"}),  # gated: T5 only
        "norm": frozenset({"layernorm", "rmsnorm"}),  # rmsnorm: T5 only
    },
    notes="post-norm with one LayerNorm eps per stack and sinusoidal positions (MarianMTModel), pre-norm with final "
          "norms and three_way tying (PegasusForConditionalGeneration), or T5's bucketed bias with pre-norm RMSNorm "
          "and no biases (T5ForConditionalGeneration); one FFN kind, d_k = d_v = d_model/heads (T5: any d_k), "
          "kv_heads = heads",
    check=_hf_structure,
)

TARGETS = {t.name: t for t in (CTRANSLATE2, HF)}


def _supports(target: Target, registry: str) -> str:
    return f"{target.name} supports {registry}: {', '.join(sorted(target.kinds[registry]))}"


def check_exportable(spec: Spec, target: Target) -> None:
    """Raise ``UnsupportedExport`` naming the first thing ``target`` cannot represent: what no target has a place
    for, then what the class of the model's graph cannot hold (``export_class``)."""
    model = spec.model
    view = resolve(model)
    if model.char_input is not None:
        raise UnsupportedExport(f"cannot export to {target.name}: model.char_input ({model.char_input.kind}) "
                                f"pools each piece's characters into its embedding, which {target.name} has no place "
                                "for; export a model without a character input")
    unscaled = _unscaled(view)  # only T5's class computes them (the other graphs' classes refuse bucketed positions)
    if unscaled is not None and not (target.name == "hf" and hf_seq2seq_class(spec) == "t5"):
        raise UnsupportedExport(f"cannot export to {target.name}: {unscaled} scaled false (unscaled scores, T5's); "
                                "only T5ForConditionalGeneration (--to hf, positional bucketed) computes them")

    def refuse_graph(what: str) -> None:
        raise UnsupportedExport(f"cannot export {model.called} to {target.name}: {what}")

    export_class(spec, view, target.name, refuse_graph)


def translator_class(spec: Spec, view: ResolvedModel, target_name: str, refuse_graph: Refuse) -> str:
    """An encoder-decoder's checks for the target (the kinds it represents, the paper's layer order, no pointer,
    its structure: ``Target.check``) and the Hugging Face class it maps to (``hf_seq2seq_class``)."""
    target, model = TARGETS[target_name], spec.model

    def refuse(what: str, registry: str | None = None) -> None:
        tail = _supports(target, registry) if registry else f"{target.name} needs {target.notes}"
        raise UnsupportedExport(f"cannot export to {target.name}: {what}; {tail}")

    def kind(registry: str, component: object, where: str) -> None:
        name = getattr(component, "kind", type(component).__name__)
        if name not in target.kinds[registry]:
            refuse(f"{registry} kind {name!r} ({where})", registry)

    if model.embedding_norm and target.name != "hf":  # hf: BART's classes
        raise UnsupportedExport(f"cannot export to {target.name}: model.embedding_norm true (a norm on the "
                                f"embedding sum, which {target.name}'s classes for {model.called} have no place for)")
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
    return hf_seq2seq_class(spec)


# model.kind -> the check of what its export's class holds, returning the class (GRAPH_CLASSES: the other graphs')
EXPORT_CLASSES: dict[str, Callable[[Spec, ResolvedModel, str, Refuse], str]] = {
    "encoder_decoder": translator_class, **GRAPH_CLASSES}


def export_class(spec: Spec, view: ResolvedModel, target: str, refuse: Refuse) -> str:
    """The class ``spec`` exports to for ``target`` (hf or ctranslate2; a translator's: its Hugging Face class,
    from which CTranslate2 converts), or a refusal naming the field."""
    return EXPORT_CLASSES[spec.model.kind](spec, view, target, refuse)


def export_targets(spec: Spec) -> dict[str, str | None]:
    """For every target: None if ``spec`` can be exported to it, else why not (torch-free: ``validate``)."""
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


# What an export format itself cannot hold, per target, beyond the settings its runtime lacks
# (decoding/request.py: LACKS).
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
    """For every target, for ``decode`` and each named profile: None if its runtime honours them, else why not."""
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

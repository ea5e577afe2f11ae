"""Which Hugging Face class holds a decoder-only or encoder-only model exactly, and the one-line refusal
of everything no mapped class computes. Torch-free (``validate`` and ``inspect`` call it through
``targets.check_exportable``).

- decoder_only -> ``GPT2LMHeadModel`` (a position table, LayerNorm, a ReLU/GELU FFN) or ``LlamaForCausalLM``
  (RoPE, RMSNorm, SwiGLU, grouped K/V heads); both pre-norm with a final norm and 1/√d_k scaling (§3.2.1).
- encoder_only -> XLM-RoBERTa-XL's classes (pre-norm) or BERT's (post-norm with an embedding norm), each
  head's (``ENCODER_HEADS``); the mappings themselves: ``engine/hf/gpt2.py``, ``llama.py``, ``bert.py``.
- CTranslate2 takes the decoder-only models through its own converter from the Hugging Face class;
  it has no encoder with a classification head.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tbuild.builder.resolved import ResolvedModel, ResolvedStack
from tbuild.builder.spec import Spec

Refuse = Callable[[str], None]
TABLE_POSITIONS = frozenset({"learned", "sinusoidal", "none"})  # written as a learned table (1024 rows by default)
TABLE_ROWS = 1024


def _uniform(stack: ResolvedStack, placement: str, refuse: Refuse, want: str = "pre") -> tuple[str, str, str]:
    """The stack's one (attention kind, ffn kind, norm kind), refusing what one HF config cannot hold."""
    where = f"model.{stack.name}"
    if placement != want:
        refuse(f"model.norm_placement {placement} (the mapped classes are pre-norm)")
    if want == "pre" and stack.final_norm is None:
        refuse(f"{where} has no final norm (model.final_norm: false; the mapped classes end with one)")
    if stack.prefix:
        refuse(f"{where} is a prefix LM (bidirectional over a prefix; the mapped classes are causal throughout)")
    if stack.d_k != stack.d_v:
        refuse(f"{where} d_k ({stack.d_k}) differs from d_v ({stack.d_v})")
    for i, g in enumerate(stack.groups):
        if not g.layout.standard:
            refuse(f"{where} layer group {i} order {g.layout.describe()} (the mapped classes' layers are "
                   "self-attention then feed-forward)")
    kinds = {(g.attention.kind, g.ffn.kind, g.norm.kind, g.norm.eps, getattr(g.attention, "bias", None),  # type: ignore[attr-defined]
              getattr(g.attention, "kv_heads", None) or stack.heads) for g in stack.groups}  # an attention kind without
    # bias or kv_heads (relative, local...) is refused below by its kind
    norms = {(g.norm.kind, g.norm.eps) for g in stack.groups}  # type: ignore[attr-defined]
    if stack.final_norm is not None:
        norms.add((stack.final_norm.kind, stack.final_norm.eps))  # type: ignore[attr-defined]
    if len(kinds) > 1 or len(norms) > 1:
        refuse(f"{where} layer groups differ in attention, FFN, norm, bias or kv_heads (one config holds one of each)")
    attention, ffn, norm, *_ = kinds.pop()
    if attention != "multihead":
        refuse(f"attention kind {attention!r} (the mapped classes' attention is multihead)")
    return attention, ffn, norm


def causal_lm_class(spec: Spec, view: ResolvedModel, target: str, refuse: Refuse) -> str:
    """``gpt2`` or ``llama``: the class that computes this decoder-only model for ``target`` (refusing what
    neither does, or what CTranslate2's converter does not take)."""
    model, stack = spec.model, view.stacks[0]
    if target == "ctranslate2" and getattr(view.positional, "scaling", None) is not None:
        refuse("model.positional.scaling llama3 (CTranslate2's Llama converter reads it from config.rope_scaling, "
               "which transformers 5 no longer writes; --to hf keeps it)")
    if target == "ctranslate2" and stack.d_k * stack.heads != model.d_model:
        refuse(f"model.decoder d_k {stack.d_k} · heads {stack.heads} ≠ d_model {model.d_model} (CTranslate2's "
               "Llama converter takes d_model/heads; --to hf keeps it)")
    if model.prefix is not None:
        refuse("model.prefix_lm (a translator packed into one sequence; export takes language models)")
    if model.embedding_norm:
        refuse("model.embedding_norm true (a norm on the embedding sum, which GPT-2 and Llama have no place for)")
    name = _causal_lm_layers(spec, view, refuse)
    if model.scale_embeddings and model.tie_embeddings != "none":
        refuse("model.scale_embeddings true with a tied output (GPT-2 and Llama do not scale embeddings by "
               "√d_model; untie them, tie_embeddings: none, or train with scale_embeddings: false)")
    return name


def _causal_lm_layers(spec: Spec, view: ResolvedModel, refuse: Refuse) -> str:
    model, stack = spec.model, view.stacks[0]
    _, ffn, norm = _uniform(stack, model.norm_placement, refuse)
    positional = view.positional.kind  # type: ignore[attr-defined]
    if positional == "rope":
        if ffn != "swiglu" or norm != "rmsnorm":
            refuse(f"model.positional rope with ffn {ffn} and norm {norm} (the rotary class mapped, Llama, "
                   "has SwiGLU and RMSNorm)")
        if {g.ffn.kind for g in stack.groups} != {"swiglu"}:  # type: ignore[attr-defined]
            refuse("model.ffn mixes kinds")
        return "llama"
    if positional not in TABLE_POSITIONS:
        refuse(f"model.positional {positional} (the mapped classes compute rope (Llama) or a position table "
               "(GPT-2: learned, sinusoidal or none))")
    if ffn not in ("relu", "gelu", "gelu_tanh") or norm != "layernorm":
        refuse(f"model.ffn {ffn} and model.norm {norm} with {positional} positions (GPT-2 has LayerNorm and a "
               "two-layer ReLU/GELU FFN; SwiGLU and RMSNorm map to Llama, which needs rope)")
    _heads_tile_width(stack, model.d_model, refuse)
    if positional == "learned" and stack.max_positions is None:  # pragma: no cover - the schema requires it
        refuse("model.max_positions is unset")
    return "gpt2"


def _heads_tile_width(stack: ResolvedStack, d_model: int, refuse: Refuse) -> None:
    if stack.d_k * stack.heads != d_model:
        refuse(f"model.{stack.name} d_k ({stack.d_k}) · heads ({stack.heads}) differs from d_model ({d_model})")
    kv = {g.attention.kv_heads for g in stack.groups} - {None, stack.heads}  # type: ignore[attr-defined]
    if kv:
        refuse(f"model.attention kv_heads {min(kv)} (GPT-2 and XLM-RoBERTa-XL give every head its own K/V)")


def tagger_class(spec: Spec, view: ResolvedModel, target: str, refuse: Refuse) -> str:
    """The class that computes this encoder-only model (``ENCODER_HEADS``: XLM-RoBERTa-XL's for pre-norm
    layers, BERT's for post-norm ones with an embedding norm; a tagger's, a classifier's or a masked LM's), or
    a refusal (CTranslate2 has no such class)."""
    if target == "ctranslate2":
        refuse("CTranslate2's Encoder returns hidden states and has no classification head; export it with "
               "--to hf")
    model, stack = spec.model, view.stacks[0]
    mapped = ENCODER_HEADS.get(model.output_head.kind)
    post = model.norm_placement == "post"
    if mapped is None:
        refuse(f"model.head {model.output_head.kind} (the mapped classes' heads: "
               f"{', '.join(ENCODER_HEADS)})")
    name = "BERT" if post else "XLM-RoBERTa-XL"
    if model.embedding_norm != post:
        refuse(f"model.embedding_norm {str(model.embedding_norm).lower()} with {model.norm_placement}-norm layers "
               "(the post-norm class mapped, BERT, normalises its embeddings; the pre-norm one, XLM-RoBERTa-XL, "
               "does not)")
    _, ffn, norm = _uniform(stack, model.norm_placement, refuse, want=model.norm_placement)
    if post and (model.norm.kind, model.norm.eps) != (stack.groups[0].norm.kind, stack.groups[0].norm.eps):  # type: ignore[attr-defined]
        refuse("model.norm differs from the layers' norm (BERT has one LayerNorm eps)")
    positional = view.positional.kind  # type: ignore[attr-defined]
    if positional not in TABLE_POSITIONS:
        refuse(f"model.positional {positional} ({name} holds a position table: learned, sinusoidal or none)")
    if ffn not in ("relu", "gelu", "gelu_tanh") or norm != "layernorm":
        refuse(f"model.ffn {ffn} and model.norm {norm} ({name} has LayerNorm and a ReLU/GELU FFN)")
    _heads_tile_width(stack, model.d_model, refuse)
    if mapped.check is not None:  # type: ignore[union-attr]
        mapped.check(spec, ffn, refuse)  # type: ignore[union-attr]
    return mapped.classes[post]  # type: ignore[union-attr]


def _pooled_head(spec: Spec, ffn: str, refuse: Refuse) -> None:
    """A classifier's head as BERT's and RoBERTa's: the first position through a dense layer and tanh."""
    head = spec.model.head
    if head.pooling != "first" or not head.dense:  # type: ignore[union-attr]
        refuse(f"model.head pooling {head.pooling}, dense {str(head.dense).lower()} (BERT's and RoBERTa's "  # type: ignore[union-attr]
               "classifiers pool the first position through a dense layer and tanh: pooling: first, dense: true)")


def _masked_lm_head(spec: Spec, ffn: str, refuse: Refuse) -> None:
    """A masked LM's head as BERT's and RoBERTa's: the transform (dense, GELU, norm), unscaled embeddings."""
    model = spec.model
    if not model.head.transform:  # type: ignore[union-attr]
        refuse("model.head.transform false (BERT's and RoBERTa's masked LMs' output layer follows a dense "
               "layer, GELU and a LayerNorm: transform: true)")
    if ffn != "gelu" and model.norm_placement == "post":
        refuse(f"model.ffn {ffn} with a masked_lm head (BertForMaskedLM's transform takes the FFN's "
               "activation, and tbuild's transform is GELU)")
    if model.scale_embeddings and model.tie_embeddings != "none":
        refuse("model.scale_embeddings true with a tied output (BERT and RoBERTa do not scale embeddings by "
               "√d_model; untie them, tie_embeddings: none, or train with scale_embeddings: false)")


@dataclass(frozen=True)
class EncoderHead:
    """How an encoder-only model's head maps: its classes (the pre-norm one, XLM-RoBERTa-XL's; the post-norm
    one, BERT's) and what it needs beyond a linear layer there (a tagger's: nothing)."""

    classes: tuple[str, str]
    check: Callable[[Spec, str, Refuse], None] | None = None


# model.head kind -> how it maps (BERT's and RoBERTa's heads alike)
ENCODER_HEADS = {"token_classification": EncoderHead(("xlm_roberta_xl", "bert")),
                 "sequence_classification": EncoderHead(("xlm_roberta_xl_sequence", "bert_sequence"), _pooled_head),
                 "masked_lm": EncoderHead(("xlm_roberta_xl_masked_lm", "bert_masked_lm"), _masked_lm_head)}


# model.kind -> the class its export maps to (a translator's: targets.py's translator_class)
GRAPH_CLASSES: dict[str, Callable[[Spec, ResolvedModel, str, Refuse], str]] = {
    "encoder_only": tagger_class, "decoder_only": causal_lm_class}

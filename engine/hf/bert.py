"""BERT, RoBERTa, XLM-RoBERTa and XLM-RoBERTa-XL with a token-classification, sequence-classification or
masked-LM head, or none (``BertModel``: ``config.json``'s ``architectures`` names which) as a tbuild
``encoder_only`` model; a tagger, classifier or masked LM exports to BERT's classes (post-norm) or
XLM-RoBERTa-XL's (pre-norm). The map, both ways:

- Layers: BERT's and RoBERTa's are post-norm (LayerNorm(x + Sublayer(x)), §3.1) with ``model.embedding_norm``
  (BERT's LayerNorm on the sum of token, position and token-type embeddings, Devlin et al. 2019) and no final
  norm; XLM-RoBERTa-XL's pre-norm with a final LayerNorm and no embedding norm.
- Positions: the learned table. tbuild adds no token-type embedding: every input is type 0, whose row an
  import adds to every position's row (an export writes one zero row). RoBERTa counts positions from the
  padding id + 1: its row pad + 1 + p is tbuild's row p (an export writes that many zero rows first).
- Heads: a tagger's classifier (``token_classification``); BERT's pooler (tanh(W·h_[CLS] + b)) and RoBERTa's
  classification head (the same on <s>) as ``sequence_classification`` with ``pooling: first`` and ``dense``; the
  masked LM's transform (dense, GELU, LayerNorm) as ``masked_lm`` with ``transform``. A headless class
  (``BertModel``, import only) as ``sentence_embedding``, its pooling the folder's (``pooling.py``); its
  pooler, which sentence vectors do not read, is left out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from tbuild.builder.resolved import resolve
from tbuild.builder.spec import Spec

from ..data.word_labels import word_bos, word_piece
from .family import FROM_HF, TO_HF, Family, position_table, refuse_field, scaled_tokens
from .maps import LAYER, Map, State, expanded, linear, norm, rule
from .pooling import sentence_head

if TYPE_CHECKING:
    from transformers import PretrainedConfig

PREFIXES = {"bert": "Bert", "roberta": "Roberta", "xlm-roberta": "XLMRoberta",  # model_type -> class prefix
            "xlm-roberta-xl": "XLMRobertaXL"}
PRE_NORM = frozenset({"xlm-roberta-xl"})  # pre-norm layers, a final LayerNorm, no norm on the embeddings
LINEARS = (("self_attn.sublayer.w_q", "attention.self.query"), ("self_attn.sublayer.w_k", "attention.self.key"),
           ("self_attn.sublayer.w_v", "attention.self.value"), ("self_attn.sublayer.w_o", "attention.output.dense"),
           ("ffn.sublayer.w1", "intermediate.dense"), ("ffn.sublayer.w2", "output.dense"))
NORMS = {True: (("self_attn.norm", "attention.self_attn_layer_norm"), ("ffn.norm", "LayerNorm")),
         False: (("self_attn.norm", "attention.output.LayerNorm"), ("ffn.norm", "output.LayerNorm"))}


def _sequence_head(bert: bool) -> Map:
    pooler, out = ("bert.pooler.dense", "classifier") if bert else ("classifier.dense", "classifier.out_proj")
    return linear(pooler, "head.dense") | linear(out, "head")


def _masked_lm_head(bert: bool) -> Map:
    lm = "cls.predictions" if bert else "lm_head"
    transform = f"{lm}.transform" if bert else lm
    norm_name = f"{transform}.LayerNorm" if bert else f"{lm}.layer_norm"
    # the head's bias under both names (one tensor where the output is tied); read back from the decoder's,
    # the one its forward adds (last: a later name gives the tensor)
    return ({f"{lm}.bias": rule("head.bias", optional=True)} | linear(f"{transform}.dense", "head.dense")
            | norm(norm_name, "head.norm") | linear(f"{lm}.decoder", "head"))


@dataclass(frozen=True)
class Head:
    """One head kind: its class suffix, its map (BERT's names or RoBERTa's), the spec's head from a config,
    the data set it trains on, and whether it may tie its output to the embeddings."""

    suffix: str
    names: Callable[[bool], Map]
    fields: Callable[[PretrainedConfig], dict]
    dataset: dict | str
    ties: bool = False


def _labels(config: PretrainedConfig, kind: str) -> list[str]:
    labels = [str(config.id2label[i]) for i in range(config.num_labels)]
    if len(labels) < 2:
        refuse_field("num_labels", config.num_labels, f"tbuild's {kind} head scores at least 2 labels (no regression)")
    if len(set(labels)) != len(labels):
        refuse_field("id2label", config.id2label, "tbuild's labels are distinct")
    return labels


def _masked_lm_fields(config: PretrainedConfig) -> dict:
    if config.model_type == "bert" and config.hidden_act != "gelu":
        refuse_field("hidden_act", config.hidden_act, "tbuild's masked_lm transform is GELU (BertForMaskedLM's "
                     "follows hidden_act)")
    return {"kind": "masked_lm", "transform": True, "bias": True}


HEADS = {  # model.head kind -> how it maps
    "token_classification": Head("ForTokenClassification", lambda _bert: linear("classifier", "head"), lambda c: {
        "kind": "token_classification", "labels": _labels(c, "token_classification"), "bias": True,
        "piece": getattr(c, "tbuild_word_piece", "first"),  # a tbuild export's, else BERT's
        "bos": getattr(c, "tbuild_word_bos", True)}, {"kind": "tagging", "source": "files"}),  # [CLS] read first
    "sequence_classification": Head("ForSequenceClassification", _sequence_head, lambda c: {
        "kind": "sequence_classification", "labels": _labels(c, "sequence_classification"), "bias": True,
        "pooling": "first", "dense": True}, {"kind": "classification", "source": "files"}),
    "masked_lm": Head("ForMaskedLM", _masked_lm_head, _masked_lm_fields, "text", ties=True),
    # the headless class (BertModel): its pooler unused, its pooling the folder's (``folder_fields``)
    "sentence_embedding": Head("Model", lambda _bert: {}, lambda _c: {"kind": "sentence_embedding"}, "text"),
}


def head_of(class_name: str) -> str:
    """The head kind of the transformers class ``class_name``."""
    return next(kind for kind, head in HEADS.items() if class_name.endswith(head.suffix))


def hf_class(config: dict) -> str:
    """The transformers class ``config.json``'s ``architectures`` names (a head tbuild has)."""
    prefix = PREFIXES[config["model_type"]]
    names_given = config.get("architectures") or []
    known = [prefix + head.suffix for head in HEADS.values()]
    if len(names_given) != 1 or names_given[0] not in known:
        refuse_field("architectures", names_given, f"tbuild imports {', '.join(known)}")
    return names_given[0]


def _base(cls: str) -> str:
    """The prefix of the encoder's names in ``cls``: ``bert.``, ``roberta.``, none in a headless class."""
    return "" if head_of(cls) == "sentence_embedding" else "bert." if cls.startswith("Bert") else "roberta."


def names(spec: Spec, model: nn.Module, cls: str) -> Map:
    """The map of an encoder with its head, in the names of the transformers class ``cls`` (BERT's ``bert.``,
    RoBERTa's and XLM-RoBERTa(-XL)'s ``roberta.``; the norms where its layers put them)."""
    pre, bert = spec.model.norm_placement == "pre", cls.startswith("Bert")
    base = _base(cls)
    out: Map = {f"{base}embeddings.word_embeddings.weight": rule("src_embed.tokens.weight")}
    out |= norm(f"{base}embeddings.LayerNorm", "src_embed.norm") | norm(f"{base}encoder.LayerNorm", "encoder_norm")
    layer, ours = f"{base}encoder.layer.{LAYER}", f"encoder.{LAYER}"
    for mine, theirs in LINEARS:
        out |= linear(f"{layer}.{theirs}", f"{ours}.{mine}")
    for mine, theirs in NORMS[pre]:
        out |= norm(f"{layer}.{theirs}", f"{ours}.{mine}")
    return expanded(out | HEADS[head_of(cls)].names(bert), model)  # the head the class names


def check(config: PretrainedConfig) -> None:
    """Refuse, naming the field and its value, what tbuild's encoder cannot compute."""
    if config.hidden_act not in FROM_HF:
        refuse_field("hidden_act", config.hidden_act, f"tbuild's FFN kinds for this class are {', '.join(FROM_HF)}")
    position = getattr(config, "position_embedding_type", None) or "absolute"
    if position != "absolute":
        refuse_field("position_embedding_type", position, "tbuild imports absolute (learned) positions")
    if getattr(config, "is_decoder", False) or getattr(config, "add_cross_attention", False):
        refuse_field("is_decoder", True, "tbuild imports these classes as encoders")


def offset(config: PretrainedConfig) -> int:
    """The table row of tbuild's position 0: RoBERTa's padding id + 1, BERT's 0."""
    return 0 if config.model_type == "bert" else config.pad_token_id + 1


def fields(hf: nn.Module) -> tuple[dict, State]:
    """The spec's ``model`` section for ``hf``, and the position table (type 0's row folded in)."""
    config = hf.config
    check(config)
    head = HEADS[head_of(type(hf).__name__)]
    embeddings = hf.base_model.embeddings  # BERT's ``bert``, RoBERTa's ``roberta``, a headless class itself
    table = embeddings.position_embeddings.weight.detach().float()[offset(config):]
    table = table + embeddings.token_type_embeddings.weight.detach().float()[0]
    dropout, pre = config.hidden_dropout_prob, config.model_type in PRE_NORM
    return {
        "kind": "encoder_only", "vocab_size": embeddings.word_embeddings.weight.size(0), "d_model": config.hidden_size,
        "encoder": {"layers": config.num_hidden_layers, "heads": config.num_attention_heads,
                    "d_ff": config.intermediate_size},
        "head": head.fields(config), "attention": {"kind": "multihead", "bias": True},
        "positional": {"kind": "learned"},
        "ffn": {"kind": FROM_HF[config.hidden_act]}, "norm": {"kind": "layernorm", "eps": config.layer_norm_eps},
        "norm_placement": "pre" if pre else "post", "final_norm": pre, "embedding_norm": not pre,
        "scale_embeddings": False,
        "tie_embeddings": "three_way" if head.ties and config.tie_word_embeddings else "none",
        "dropout": {"residual": dropout, "embedding": dropout, "attention": config.attention_probs_dropout_prob,
                    "activation": 0.0},
        "max_positions": table.size(0),
    }, {"src_embed.positional.embedding.weight": table}


def folder_fields(folder: Path, fields: dict) -> dict:
    """A headless encoder's head from the folder's other files (``pooling.py``: sentence-transformers'
    pooling, normalization and input limit); another head's fields as they are."""
    if fields["head"]["kind"] != "sentence_embedding":
        return fields
    return fields | {"head": sentence_head(folder, fields["d_model"], fields["max_positions"])}


def _lead(spec: Spec, cls: str) -> int:
    """The position rows before tbuild's row 0 in the class's table: RoBERTa's padding id + 1, BERT's none."""
    return 0 if cls.startswith("Bert") else (spec.special().pad or 0) + 1


def config(model: nn.Module, spec: Spec, key: str):  # noqa: ANN201 - a BertConfig or XLMRobertaXLConfig
    """The config of the export ``key``'s class: sizes, eps, activation, tying, labels, the run's special ids."""
    import transformers

    m, stack = spec.model, resolve(spec.model).stacks[0]
    group, special, cls = stack.groups[0], spec.special(), EXPORTS_OF[key]
    labels = list(m.output_head.label_set() or ["LABEL_0", "LABEL_1"])  # a masked LM has none
    fields = {"id2label": dict(enumerate(labels)), "label2id": {x: i for i, x in enumerate(labels)},
              "tbuild_word_piece": word_piece(spec),  # which of a word's pieces to read its label at
              "tbuild_word_bos": word_bos(spec),  # whether a sentence's row starts with BOS
              "tie_word_embeddings": key.endswith("masked_lm") and m.tie_embeddings != "none",
              "vocab_size": model.src_embed.tokens.weight.size(0), "hidden_size": m.d_model,
              "num_hidden_layers": len(model.encoder), "num_attention_heads": stack.heads,
              "intermediate_size": stack.d_ff, "hidden_act": TO_HF[group.ffn.kind],  # type: ignore[attr-defined]
              "max_position_embeddings": position_table(model, spec, "src_embed").size(0) + _lead(spec, cls),
              "type_vocab_size": 1, "layer_norm_eps": group.norm.eps,  # type: ignore[attr-defined]
              "hidden_dropout_prob": m.dropout.residual, "attention_probs_dropout_prob": m.dropout.attention,
              "pad_token_id": special.pad, "bos_token_id": special.bos, "eos_token_id": special.eos}
    return getattr(transformers, "BertConfig" if cls.startswith("Bert") else "XLMRobertaXLConfig")(**fields)


def extra(model: nn.Module, spec: Spec, cls: str) -> State:
    """The position table (after the class's leading rows) and one zero token-type row."""
    base = "bert" if cls.startswith("Bert") else "roberta"
    table = position_table(model, spec, "src_embed")
    lead = torch.zeros(_lead(spec, cls), table.size(1))
    return {f"{base}.embeddings.position_embeddings.weight": torch.cat([lead, table]),
            f"{base}.embeddings.token_type_embeddings.weight": torch.zeros(1, spec.model.d_model)}


TAILS = {"": "token_classification", "_sequence": "sequence_classification", "_masked_lm": "masked_lm"}
EXPORTS_OF = {f"{key}{tail}": f"{prefix}{HEADS[kind].suffix}"  # export key -> class (graph_targets.ENCODER_HEADS')
              for key, prefix in (("bert", "Bert"), ("xlm_roberta_xl", "XLMRobertaXL")) for tail, kind in TAILS.items()}

BERT = Family(model_types=tuple(PREFIXES), hf_class=hf_class, check=check, fields=fields, names=names,
              dataset=lambda c: HEADS[head_of(hf_class(c))].dataset, config=config, extra=extra,
              finish=scaled_tokens("embeddings.word_embeddings.weight"),
              exports=EXPORTS_OF, folder=folder_fields)

"""Import a Hugging Face BERT, RoBERTa, XLM-RoBERTa or XLM-RoBERTa-XL model with a token-classification,
sequence-classification or masked-LM head (``config.json``'s ``architectures`` names which) as a tbuild
``encoder_only`` model, each step exact:

- Post-norm layers (LayerNorm(x + Sublayer(x)), §3.1), no final norm, and ``model.embedding_norm``: BERT's
  LayerNorm on the sum of token, position and token-type embeddings (Devlin et al. 2019). XLM-RoBERTa-XL
  (what the export writes for a pre-norm tagger) is pre-norm with a final LayerNorm and no embedding norm.
- Positions: the learned table. tbuild adds no token-type embedding: every input is type 0, whose row is
  added to every position's row. RoBERTa counts positions from the padding id + 1, so its table is sliced
  there (tbuild's row p is its row pad + 1 + p).
- The heads: a tagger's classifier as ``token_classification``; BERT's pooler (tanh(W·h_[CLS] + b)) and
  RoBERTa's classification head (the same on <s>) as ``sequence_classification`` with ``pooling: first`` and
  ``dense``; the masked LM's transform (dense, GELU, LayerNorm) as ``masked_lm`` with ``transform``.

Refused in one line naming the config field and value: an activation tbuild does not have (exact ``gelu`` and
``relu`` map), another position scheme than ``absolute``, a decoder (``is_decoder``), a one-label (regression)
classifier, another head class. Special ids other than tbuild's are renumbered with a tokenizer.json
(``hf_ids.py``), refused with a sentencepiece model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

from ..export.hf_activations import FROM_HF
from ..export.hf_graphs import ENCODER_LINEARS, ENCODER_NORMS
from .hf_source import UnsupportedImport

if TYPE_CHECKING:
    from transformers import PretrainedConfig

PREFIXES = {"bert": "Bert", "roberta": "Roberta", "xlm-roberta": "XLMRoberta",  # model_type -> class prefix
            "xlm-roberta-xl": "XLMRobertaXL"}
PRE_NORM = frozenset({"xlm-roberta-xl"})  # pre-norm layers, a final LayerNorm, no norm on the embeddings
State = dict[str, torch.Tensor]


def _refuse(field: str, value: object, why: str) -> None:
    raise UnsupportedImport(f"config.json {field} {value!r}: {why}")


def hf_class(config: dict) -> str:
    """The transformers class ``config.json``'s ``architectures`` names (a head tbuild has)."""
    prefix = PREFIXES[config["model_type"]]
    names = config.get("architectures") or []
    known = [prefix + suffix for suffix in HEADS]
    if len(names) != 1 or names[0] not in known:
        _refuse("architectures", names, f"tbuild imports {', '.join(known)}")
    return names[0]


def head_of(class_name: str) -> HfHead:
    """How the head of the transformers class ``class_name`` imports."""
    return next(head for suffix, head in HEADS.items() if class_name.endswith(suffix))


def dataset(config: dict) -> dict | str:
    """The data set an encoder with ``config.json``'s head trains on (the spec's data.dataset)."""
    return head_of(hf_class(config)).dataset


def check_config(config: PretrainedConfig) -> None:  # a BertConfig, RobertaConfig or XLMRobertaConfig
    """Refuse, naming the field and its value, what tbuild's encoder cannot compute."""
    if config.hidden_act not in FROM_HF:
        _refuse("hidden_act", config.hidden_act, f"tbuild's FFN kinds for this class are {', '.join(FROM_HF)}")
    position = getattr(config, "position_embedding_type", None) or "absolute"
    if position != "absolute":
        _refuse("position_embedding_type", position, "tbuild imports absolute (learned) positions")
    if getattr(config, "is_decoder", False) or getattr(config, "add_cross_attention", False):
        _refuse("is_decoder", True, "tbuild imports these classes as encoders")


def _labels(config: PretrainedConfig, kind: str) -> list[str]:
    labels = [str(config.id2label[i]) for i in range(config.num_labels)]
    if len(labels) < 2:
        _refuse("num_labels", config.num_labels, f"tbuild's {kind} head scores at least 2 labels (no regression)")
    if len(set(labels)) != len(labels):
        _refuse("id2label", config.id2label, "tbuild's labels are distinct")
    return labels


def _masked_lm_fields(config: PretrainedConfig) -> dict:
    if config.model_type == "bert" and config.hidden_act != "gelu":
        _refuse("hidden_act", config.hidden_act, "tbuild's masked_lm transform is GELU (BertForMaskedLM's "
                "follows hidden_act)")
    return {"kind": "masked_lm", "transform": True, "bias": True}


def _sequence_fields(config: PretrainedConfig) -> dict:
    return {"kind": "sequence_classification", "labels": _labels(config, "sequence_classification"), "bias": True,
            "pooling": "first", "dense": True}


def _token_fields(config: PretrainedConfig) -> dict:
    return {"kind": "token_classification", "labels": _labels(config, "token_classification"), "bias": True,
            "piece": getattr(config, "tbuild_word_piece", "first"),  # a tbuild export's, else BERT's
            "bos": getattr(config, "tbuild_word_bos", True)}  # BERT's and RoBERTa's taggers read [CLS] first


def _base(hf: nn.Module) -> nn.Module:
    return hf.bert if hf.config.model_type == "bert" else hf.roberta


def offset(config: PretrainedConfig) -> int:
    """The table row of tbuild's position 0: RoBERTa's padding id + 1, BERT's 0."""
    return 0 if config.model_type == "bert" else config.pad_token_id + 1


def model_fields(hf: nn.Module, family: str) -> tuple[dict, State]:
    """The spec's ``model`` section for ``hf``, and the position table (type 0's row folded in)."""
    config = hf.config
    check_config(config)
    head = head_of(type(hf).__name__)
    embeddings = _base(hf).embeddings
    start = offset(config)
    table = embeddings.position_embeddings.weight.detach().float()[start:]
    table = table + embeddings.token_type_embeddings.weight.detach().float()[0]
    tied = head.ties and config.tie_word_embeddings
    dropout, pre = config.hidden_dropout_prob, family in PRE_NORM
    fields = {
        "kind": "encoder_only", "vocab_size": embeddings.word_embeddings.weight.size(0), "d_model": config.hidden_size,
        "encoder": {"layers": config.num_hidden_layers, "heads": config.num_attention_heads,
                    "d_ff": config.intermediate_size},
        "head": head.fields(config), "attention": {"kind": "multihead", "bias": True},
        "positional": {"kind": "learned"},
        "ffn": {"kind": FROM_HF[config.hidden_act]}, "norm": {"kind": "layernorm", "eps": config.layer_norm_eps},
        "norm_placement": "pre" if pre else "post", "final_norm": pre, "embedding_norm": not pre,
        "scale_embeddings": False,
        "dropout": {"residual": dropout, "embedding": dropout, "attention": config.attention_probs_dropout_prob,
                    "activation": 0.0},
        "tie_embeddings": "three_way" if tied else "none", "max_positions": table.size(0),
    }
    return fields, {"src_embed.positional.embedding.weight": table}


def _linear(t: State, theirs: str, ours: str) -> State:
    return {f"{ours}.{p}": t[f"{theirs}.{p}"] for p in ("weight", "bias") if f"{theirs}.{p}" in t}


def _token_state(t: State, family: str) -> State:
    return _linear(t, "classifier", "head")


def _sequence_state(t: State, family: str) -> State:
    if family == "bert":
        return _linear(t, "bert.pooler.dense", "head.dense") | _linear(t, "classifier", "head")
    return _linear(t, "classifier.dense", "head.dense") | _linear(t, "classifier.out_proj", "head")


def _masked_lm_state(t: State, family: str) -> State:
    lm = "cls.predictions" if family == "bert" else "lm_head"
    transform = f"{lm}.transform" if family == "bert" else lm
    norm = f"{transform}.LayerNorm" if family == "bert" else f"{lm}.layer_norm"
    return (_linear(t, f"{transform}.dense", "head.dense") | _linear(t, norm, "head.norm")
            | _linear(t, f"{lm}.decoder", "head"))


@dataclass(frozen=True)
class HfHead:
    """How one transformers head class imports: the spec's head (from the config), the data set it trains on,
    its weights in tbuild's names, and whether it may tie its output to the embeddings."""

    fields: Callable[[PretrainedConfig], dict]
    dataset: dict | str
    state: Callable[[State, str], State]
    ties: bool = False


# transformers' class suffix -> how its head imports
HEADS = {"ForTokenClassification": HfHead(_token_fields, {"kind": "tagging", "source": "files"}, _token_state),
         "ForSequenceClassification": HfHead(_sequence_fields, {"kind": "classification", "source": "files"},
                                             _sequence_state),
         "ForMaskedLM": HfHead(_masked_lm_fields, "text", _masked_lm_state, ties=True)}


def tbuild_state(model: nn.Module, hf: nn.Module, family: str) -> State:
    """tbuild parameter name -> tensor from ``hf`` (the position table comes from ``model_fields``)."""
    t = {n: p.detach().float() for n, p in hf.named_parameters(remove_duplicate=False)}
    base = "bert" if family == "bert" else "roberta"
    state = {"src_embed.tokens.weight": t[f"{base}.embeddings.word_embeddings.weight"]}
    state |= _linear(t, f"{base}.embeddings.LayerNorm", "src_embed.norm")  # post-norm classes' own
    state |= _linear(t, f"{base}.encoder.LayerNorm", "encoder_norm")  # XLM-RoBERTa-XL's final norm
    for i in range(len(model.encoder)):  # type: ignore[arg-type]  # the export's names, read the other way
        for ours, theirs in ENCODER_LINEARS + ENCODER_NORMS[family in PRE_NORM]:
            state |= _linear(t, f"{base}.encoder.layer.{i}.{theirs}", f"encoder.{i}.{ours}")
    return state | head_of(type(hf).__name__).state(t, family)


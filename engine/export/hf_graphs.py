"""Write a decoder-only model as a Hugging Face ``GPT2LMHeadModel`` or ``LlamaForCausalLM`` folder and an
encoder-only tagger as an ``XLMRobertaXLForTokenClassification`` (pre-norm) or ``BertForTokenClassification``
(post-norm, with ``model.embedding_norm``) folder (which class: ``graph_targets.py``;
call ``targets.check_exportable`` first, these functions assume what it guarantees).

The maps are one to one, with four transformations, each exact:
- GPT-2's ``Conv1D`` stores (in, out) where ``nn.Linear`` stores (out, in): transposed; its fused
  ``c_attn`` is W^Q|W^K|W^V stacked on the output axis. Biases tbuild has none of are written as zeros.
- Llama rotates each head's dimension pairs (i, i + d_k/2) (``rotate_half``), tbuild the pairs (2i, 2i+1)
  (Su et al. 2021): the rows of W^Q and W^K are permuted within each head (even rows first, then odd), so
  Llama's pair i is tbuild's pair i and q·k is unchanged (both sides permuted alike).
- √d_model embedding scaling (§3.4), which neither class has, is folded into an untied token table.
- Sinusoidal (§3.5) or no positions become the class's learned table (1024 rows, or max_positions);
  XLM-RoBERTa counts positions from row 1 (row 0 is the padding id's), so tbuild's row p is its row p + 1.

A language model with ``model.silent_ids`` (an import's copies) is written without those rows, its ids
renumbered (``hf_silent.py``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from tbuild.builder.resolved import resolve
from tbuild.builder.spec import Spec
from tbuild.builder.tokens import BOS, EOS, PAD, UNK
from tbuild.components.positional import sinusoid_table
from tbuild.components.specs.positional import RotarySpec

from ..data.tokenizers_file import NAME as TOKENIZERS
from ..data.word_labels import word_bos, word_piece
from ..pretrained.hf_ids import ROLES, Renumbering
from .graph_targets import TABLE_ROWS, check_graph
from .hf_activations import TO_HF
from .hf_config import write_tokenizers_config
from .hf_silent import folder_numbering, folder_roles, folder_spm, folder_tokenizers_file, scored_rows

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedModel

State = dict[str, torch.Tensor]
VOCAB_TABLES = frozenset({"transformer.wte.weight", "model.embed_tokens.weight", "lm_head.weight"})  # a row per id
TBUILD_ROLES = dict(zip(ROLES, (PAD, UNK, BOS, EOS), strict=True))  # each role's id in a folder with all the rows


def hf_class(spec: Spec) -> str:
    """gpt2, llama, or an encoder's class (``graph_targets.ENCODER_HEADS``; the refusal of
    ``targets.check_exportable`` otherwise)."""
    from .targets import HF, check_exportable

    check_exportable(spec, HF)
    return check_graph(spec, resolve(spec.model), "hf", lambda what: None)


def _tensors(model: nn.Module) -> State:
    return {n: p.detach().float() for n, p in model.named_parameters(remove_duplicate=False)}


def _linear(t: State, ours: str, theirs: str, *, bias: bool = True, conv1d: bool = False) -> State:
    """``theirs``.weight/.bias from tbuild's linear ``ours`` (zeros for a bias tbuild lacks)."""
    w = t[f"{ours}.weight"]
    out = {f"{theirs}.weight": w.t().contiguous() if conv1d else w}
    if bias:
        out[f"{theirs}.bias"] = t.get(f"{ours}.bias", torch.zeros(w.size(0)))
    return out


def _norm(t: State, ours: str, theirs: str) -> State:
    return {f"{theirs}.{p}": t[f"{ours}.{p}"] for p in ("weight", "bias") if f"{ours}.{p}" in t}


def position_table(model: nn.Module, spec: Spec, embed: str) -> torch.Tensor:
    """The positions tbuild adds to the embeddings as a (rows, D) table: learned rows as trained, a
    sinusoid's (§3.5) or zeros."""
    kind, d = spec.model.positional.kind, spec.model.d_model  # type: ignore[union-attr]
    rows = spec.model.max_positions or TABLE_ROWS
    if kind == "learned":
        return getattr(model, embed).positional.embedding.weight.detach().float()
    return sinusoid_table(rows, d) if kind == "sinusoidal" else torch.zeros(rows, d)


def token_table(t: State, spec: Spec, name: str) -> torch.Tensor:
    """The token embedding with §3.4's √d_model folded in (the export refuses it with a tied output)."""
    scale = math.sqrt(spec.model.d_model) if spec.model.scale_embeddings else 1.0
    return t[name] * scale if scale != 1.0 else t[name]


def gpt2_state(model: nn.Module, spec: Spec) -> State:
    """GPT2LMHeadModel's tensors from a decoder-only model (pre-norm, LayerNorm, ReLU/GELU)."""
    t = _tensors(model)
    state = {"transformer.wte.weight": token_table(t, spec, "tgt_embed.tokens.weight"),
             "transformer.wpe.weight": position_table(model, spec, "tgt_embed"),
             "lm_head.weight": t["output.weight"]}
    state |= _norm(t, "decoder_norm", "transformer.ln_f")
    for i in range(len(model.decoder)):  # type: ignore[arg-type]
        ours, theirs = f"decoder.{i}", f"transformer.h.{i}"
        att = f"{ours}.self_attn.sublayer"
        q, k, v = (_linear(t, f"{att}.w_{x}", "x") for x in "qkv")
        state[f"{theirs}.attn.c_attn.weight"] = torch.cat([q["x.weight"], k["x.weight"], v["x.weight"]]).t()
        state[f"{theirs}.attn.c_attn.bias"] = torch.cat([q["x.bias"], k["x.bias"], v["x.bias"]])
        state |= _linear(t, f"{att}.w_o", f"{theirs}.attn.c_proj", conv1d=True)
        state |= _linear(t, f"{ours}.ffn.sublayer.w1", f"{theirs}.mlp.c_fc", conv1d=True)
        state |= _linear(t, f"{ours}.ffn.sublayer.w2", f"{theirs}.mlp.c_proj", conv1d=True)
        state |= _norm(t, f"{ours}.self_attn.norm", f"{theirs}.ln_1") | _norm(t, f"{ours}.ffn.norm", f"{theirs}.ln_2")
    return state


def half_split(w: torch.Tensor, d_k: int) -> torch.Tensor:
    """Rows (heads·d_k, ...) reordered within each head: even rows, then odd (interleaved -> half-split RoPE)."""
    order = torch.cat([torch.arange(0, d_k, 2), torch.arange(1, d_k, 2)])
    rows = torch.cat([order + h * d_k for h in range(w.size(0) // d_k)])
    return w[rows]


def llama_state(model: nn.Module, spec: Spec) -> State:
    """LlamaForCausalLM's tensors from a decoder-only model (pre-norm, RoPE, RMSNorm, SwiGLU)."""
    t, view = _tensors(model), resolve(spec.model)
    d_k, bias = view.stacks[0].d_k, view.stacks[0].groups[0].attention.bias  # type: ignore[attr-defined]
    state = {"model.embed_tokens.weight": token_table(t, spec, "tgt_embed.tokens.weight"),
             "lm_head.weight": t["output.weight"], "model.norm.weight": t["decoder_norm.weight"]}
    for i in range(len(model.decoder)):  # type: ignore[arg-type]
        ours, theirs = f"decoder.{i}", f"model.layers.{i}"
        att = f"{ours}.self_attn.sublayer"
        for x, name in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "o_proj")):
            part = _linear(t, f"{att}.w_{x}", f"{theirs}.self_attn.{name}", bias=bias)
            state |= {n: half_split(p, d_k) for n, p in part.items()} if x in "qk" else part
        for ffn, name in (("w1", "gate_proj"), ("v", "up_proj"), ("w2", "down_proj")):
            state |= _linear(t, f"{ours}.ffn.sublayer.{ffn}", f"{theirs}.mlp.{name}", bias=False)
        state[f"{theirs}.input_layernorm.weight"] = t[f"{ours}.self_attn.norm.weight"]
        state[f"{theirs}.post_attention_layernorm.weight"] = t[f"{ours}.ffn.norm.weight"]
    return state


def xlmr_state(model: nn.Module, spec: Spec) -> State:
    """XLMRobertaXLForTokenClassification's tensors from an encoder-only tagger (pre-norm, LayerNorm)."""
    return _xlmr_encoder(model, spec) | _linear(_tensors(model), "head", "classifier")


def xlmr_sequence_state(model: nn.Module, spec: Spec) -> State:
    """XLMRobertaXLForSequenceClassification's tensors: the encoder, its classification head (``head.dense``,
    tanh, the output layer: RoBERTa's)."""
    t = _tensors(model)
    return _xlmr_encoder(model, spec) | _linear(t, "head.dense", "classifier.dense") | _linear(t, "head",
                                                                                             "classifier.out_proj")


def xlmr_masked_lm_state(model: nn.Module, spec: Spec) -> State:
    """XLMRobertaXLForMaskedLM's tensors: the encoder and ``lm_head`` (dense, GELU, LayerNorm, output layer)."""
    t = _tensors(model)
    state = _xlmr_encoder(model, spec) | _linear(t, "head.dense", "lm_head.dense") | _norm(t, "head.norm",
                                                                                            "lm_head.layer_norm")
    out = _linear(t, "head", "lm_head.decoder")
    return state | out | {"lm_head.bias": out["lm_head.decoder.bias"]}


# an encoder layer's linear layers and norms: tbuild's name -> the Hugging Face encoders' (BERT's, RoBERTa's and
# XLM-RoBERTa(-XL)'s alike), read one way by the export and the other by ``pretrained/hf_encoder.py``
ENCODER_LINEARS = (("self_attn.sublayer.w_q", "attention.self.query"), ("self_attn.sublayer.w_k", "attention.self.key"),
                   ("self_attn.sublayer.w_v", "attention.self.value"),
                   ("self_attn.sublayer.w_o", "attention.output.dense"),
                   ("ffn.sublayer.w1", "intermediate.dense"), ("ffn.sublayer.w2", "output.dense"))
# pre-norm (XLM-RoBERTa-XL: before each sub-layer) or post-norm (BERT, RoBERTa: after it) -> the two norms
ENCODER_NORMS = {True: (("self_attn.norm", "attention.self_attn_layer_norm"), ("ffn.norm", "LayerNorm")),
                 False: (("self_attn.norm", "attention.output.LayerNorm"), ("ffn.norm", "output.LayerNorm"))}


def _encoder_layers(model: nn.Module, t: State, theirs: str, pre_norm: bool) -> State:
    """Every encoder layer's tensors under ``theirs`` (``bert.encoder.layer``, ``roberta.encoder.layer``)."""
    state: State = {}
    for i in range(len(model.encoder)):  # type: ignore[arg-type]
        for ours, name in ENCODER_LINEARS:
            state |= _linear(t, f"encoder.{i}.{ours}", f"{theirs}.{i}.{name}")
        for ours, name in ENCODER_NORMS[pre_norm]:
            state |= _norm(t, f"encoder.{i}.{ours}", f"{theirs}.{i}.{name}")
    return state


def _xlmr_encoder(model: nn.Module, spec: Spec) -> State:
    t = _tensors(model)
    table = position_table(model, spec, "src_embed")
    pre = "roberta.embeddings"
    state = {f"{pre}.word_embeddings.weight": token_table(t, spec, "src_embed.tokens.weight"),
             f"{pre}.position_embeddings.weight": torch.cat([torch.zeros(1, table.size(1)), table]),
             f"{pre}.token_type_embeddings.weight": torch.zeros(1, spec.model.d_model)}
    state |= _norm(t, "encoder_norm", "roberta.encoder.LayerNorm")
    return state | _encoder_layers(model, t, "roberta.encoder.layer", pre_norm=True)


def bert_state(model: nn.Module, spec: Spec) -> State:
    """BertForTokenClassification's tensors from a post-norm tagger with an embedding norm: the inverse of
    ``pretrained/hf_encoder.py`` (one token type, its row zeros)."""
    return _bert_encoder(model, spec) | _linear(_tensors(model), "head", "classifier")


def bert_sequence_state(model: nn.Module, spec: Spec) -> State:
    """BertForSequenceClassification's tensors: the encoder, the pooler (``head.dense``), the classifier."""
    t = _tensors(model)
    return _bert_encoder(model, spec) | _linear(t, "head.dense", "bert.pooler.dense") | _linear(t, "head", "classifier")


def bert_masked_lm_state(model: nn.Module, spec: Spec) -> State:
    """BertForMaskedLM's tensors: the encoder, the transform (``head.dense``, ``head.norm``), the output layer
    (its bias under both of BERT's names)."""
    t = _tensors(model)
    state = _bert_encoder(model, spec) | _linear(t, "head.dense", "cls.predictions.transform.dense")
    state |= _norm(t, "head.norm", "cls.predictions.transform.LayerNorm")
    out = _linear(t, "head", "cls.predictions.decoder")
    return state | out | {"cls.predictions.bias": out["cls.predictions.decoder.bias"]}


def _bert_encoder(model: nn.Module, spec: Spec) -> State:
    t = _tensors(model)
    pre = "bert.embeddings"
    state = {f"{pre}.word_embeddings.weight": token_table(t, spec, "src_embed.tokens.weight"),
             f"{pre}.position_embeddings.weight": position_table(model, spec, "src_embed"),
             f"{pre}.token_type_embeddings.weight": torch.zeros(1, spec.model.d_model)}
    state |= _norm(t, "src_embed.norm", f"{pre}.LayerNorm")
    return state | _encoder_layers(model, t, "bert.encoder.layer", pre_norm=False)


def rope_parameters(rope: RotarySpec) -> dict[str, object]:
    """LlamaConfig's rope_parameters for tbuild's RoPE (θ's base, Llama 3's scaling where the spec has it)."""
    s = rope.scaling
    scaling = {} if s is None else {"factor": s.factor, "low_freq_factor": s.low_freq_factor,
                                    "high_freq_factor": s.high_freq_factor,
                                    "original_max_position_embeddings": s.original_max_positions}
    return {"rope_type": "default" if s is None else s.kind, "rope_theta": rope.base, **scaling}


def _vocab(model: nn.Module, numbering: Renumbering | None) -> int:
    """A language model's rows in the folder: the scored ones where ``numbering`` leaves the silent ones out."""
    return len(numbering.kept()) if numbering is not None else model.output.weight.size(0)  # type: ignore[union-attr]


def hf_config(model: nn.Module, spec: Spec, name: str, numbering: Renumbering | None = None) -> PretrainedConfig:
    """The config of class ``name`` holding ``model``'s sizes, norm eps, activation, tying and ids (a language
    model's in the folder's ``numbering``, ``hf_silent.py``; none: tbuild's)."""
    import transformers

    m, stack = spec.model, resolve(spec.model).stacks[0]
    group = stack.groups[0]
    layers, eps = len(getattr(model, stack.name)), group.norm.eps  # type: ignore[attr-defined]
    roles = folder_roles(numbering) if numbering is not None else TBUILD_ROLES
    ids = {f"{role}_token_id": roles[role] for role in ("pad", "bos", "eos")}
    if name == "gpt2":
        rows = position_table(model, spec, "tgt_embed").size(0)
        return transformers.GPT2Config(
            vocab_size=_vocab(model, numbering), n_positions=rows, n_embd=m.d_model, n_layer=layers,
            n_head=stack.heads, n_inner=stack.d_ff, activation_function=TO_HF[group.ffn.kind],  # type: ignore[attr-defined]
            layer_norm_epsilon=eps, resid_pdrop=m.dropout.residual, embd_pdrop=m.dropout.embedding,
            attn_pdrop=m.dropout.attention, tie_word_embeddings=m.tie_embeddings != "none", **ids)
    if name == "llama":
        return transformers.LlamaConfig(
            vocab_size=_vocab(model, numbering), hidden_size=m.d_model, intermediate_size=stack.d_ff,
            num_hidden_layers=layers, num_attention_heads=stack.heads, head_dim=stack.d_k,
            num_key_value_heads=group.attention.kv_heads or stack.heads,  # type: ignore[attr-defined]
            hidden_act="silu", rms_norm_eps=eps, max_position_embeddings=m.max_positions or TABLE_ROWS,
            rope_parameters=rope_parameters(m.positional),  # type: ignore[arg-type]
            attention_bias=group.attention.bias, mlp_bias=False,  # type: ignore[attr-defined]
            attention_dropout=m.dropout.attention, tie_word_embeddings=m.tie_embeddings != "none", **ids)
    labels = list(getattr(m.head, "labels", None) or ["LABEL_0", "LABEL_1"])  # a masked LM has none
    tagger = {"id2label": dict(enumerate(labels)), "label2id": {x: i for i, x in enumerate(labels)},
              "tbuild_word_piece": word_piece(spec),  # which of a word's pieces to read its label at
              "tbuild_word_bos": word_bos(spec)}  # whether a sentence's row starts with BOS
    if name.startswith("bert"):
        return transformers.BertConfig(tie_word_embeddings=name.endswith("masked_lm") and m.tie_embeddings != "none",
            vocab_size=model.src_embed.tokens.weight.size(0), hidden_size=m.d_model, num_hidden_layers=layers,
            num_attention_heads=stack.heads, intermediate_size=stack.d_ff, hidden_act=TO_HF[group.ffn.kind],  # type: ignore[attr-defined]
            max_position_embeddings=position_table(model, spec, "src_embed").size(0), type_vocab_size=1,
            layer_norm_eps=eps, hidden_dropout_prob=m.dropout.residual,
            attention_probs_dropout_prob=m.dropout.attention, **tagger, **ids)
    return transformers.XLMRobertaXLConfig(
        tie_word_embeddings=name.endswith("masked_lm") and m.tie_embeddings != "none",
        vocab_size=model.src_embed.tokens.weight.size(0), hidden_size=m.d_model, num_hidden_layers=layers,
        num_attention_heads=stack.heads, intermediate_size=stack.d_ff, hidden_act=TO_HF[group.ffn.kind],  # type: ignore[attr-defined]
        max_position_embeddings=position_table(model, spec, "src_embed").size(0) + 1, type_vocab_size=1,
        layer_norm_eps=eps, hidden_dropout_prob=m.dropout.residual, attention_probs_dropout_prob=m.dropout.attention,
        **tagger, **ids)


CLASSES = {"gpt2": ("GPT2LMHeadModel", gpt2_state), "llama": ("LlamaForCausalLM", llama_state),
           "xlm_roberta_xl": ("XLMRobertaXLForTokenClassification", xlmr_state),
           "xlm_roberta_xl_sequence": ("XLMRobertaXLForSequenceClassification", xlmr_sequence_state),
           "xlm_roberta_xl_masked_lm": ("XLMRobertaXLForMaskedLM", xlmr_masked_lm_state),
           "bert": ("BertForTokenClassification", bert_state),
           "bert_sequence": ("BertForSequenceClassification", bert_sequence_state),
           "bert_masked_lm": ("BertForMaskedLM", bert_masked_lm_state)}


def to_hf_graph(model: nn.Module, spec: Spec, numbering: Renumbering | None = None) -> PreTrainedModel:
    """An in-memory Hugging Face model holding ``model``'s weights (float32, eval mode); a language model with
    ``model.silent_ids`` without those rows (``numbering``: the folder's, ``hf_silent.folder_numbering``, found
    from ``model`` where not given)."""
    import transformers

    name = hf_class(spec)
    if numbering is None and spec.model.silent_ids:
        numbering = folder_numbering(spec, model)
    cls, state_of = CLASSES[name]
    hf = getattr(transformers, cls)(hf_config(model, spec, name, numbering)).eval()
    state = state_of(model, spec)
    if numbering is not None:
        state = {n: scored_rows(t, numbering) if n in VOCAB_TABLES else t for n, t in state.items()}
    params = dict(hf.named_parameters(remove_duplicate=False))
    missing = set(params) - set(state) - ({"lm_head.weight"} if hf.config.tie_word_embeddings else set())
    if missing or set(state) - set(params):  # pragma: no cover - a transformers release that renamed a weight
        raise AssertionError(f"{cls} weights not matched: {sorted(missing | (set(state) - set(params)))}")
    with torch.no_grad():
        for n, tensor in state.items():
            params[n].copy_(tensor)
    return hf


def write_hf_graph(model: nn.Module, spec: Spec, spm_model: Path, vocabulary: list[str], out: Path, *,
                   bos_first: bool) -> str:
    """Save the folder (config.json, model.safetensors, generation_config.json for a language model) and
    tbuild's sentencepiece model as tokenizer.model (an imported tokenizers file as tokenizer.json, with the
    tokenizer_config.json that ``PreTrainedTokenizerFast`` loads) with the folder's ids and pieces in
    tbuild-tokenizer.json (``bos_first``: whether the run's task starts its rows with BOS); tbuild's ids, or
    without ``model.silent_ids`` (``hf_silent.py``). Returns the class."""
    from transformers.utils import logging

    numbering = folder_numbering(spec, model) if spec.model.silent_ids else None
    hf = to_hf_graph(model.eval(), spec, numbering)
    name, tokenizer = _folder_tokenizer(spm_model, numbering)  # its refusal too, before anything is written
    roles = folder_roles(numbering) if numbering is not None else TBUILD_ROLES
    out.mkdir(parents=True, exist_ok=True)
    logging.disable_progress_bar()
    if hf.can_generate():  # a language model: never PAD or BOS, unless it is EOS's row (GPT-2's BOS)
        from transformers import GenerationConfig

        never = [i for i in (roles["pad"], roles["bos"]) if i is not None and i != roles["eos"]]
        hf.generation_config = GenerationConfig(bos_token_id=roles["bos"], eos_token_id=roles["eos"],
                                                pad_token_id=roles["pad"], do_sample=False, num_beams=1,
                                                suppress_tokens=never or None)
    hf.save_pretrained(str(out))
    (out / name).write_bytes(tokenizer)
    if numbering is not None:
        vocabulary = [vocabulary[i] for i in numbering.kept() if i < len(vocabulary)]
    if name == TOKENIZERS:
        tokens = {role: i if i is None else vocabulary[i] for role, i in roles.items()}
        write_tokenizers_config(out, tokens, hf.config.max_position_embeddings)
    ids = {**roles, "prepend_bos": bos_first, "vocabulary": vocabulary}
    (out / "tbuild-tokenizer.json").write_text(json.dumps(ids, ensure_ascii=False) + "\n")
    return type(hf).__name__


def _folder_tokenizer(spm_model: Path, numbering: Renumbering | None) -> tuple[str, bytes]:
    """The folder's tokenizer file, name and bytes: the run's sentencepiece model as tokenizer.model or its
    tokenizers file as tokenizer.json, in the folder's ids (``numbering``; none: tbuild's)."""
    name = TOKENIZERS if spm_model.suffix == ".json" else "tokenizer.model"
    if numbering is None:
        return name, spm_model.read_bytes()
    if name == TOKENIZERS:
        data = folder_tokenizers_file(json.loads(spm_model.read_text(encoding="utf-8")), numbering)
        return name, json.dumps(data, ensure_ascii=False).encode()
    return name, folder_spm(spm_model, numbering)

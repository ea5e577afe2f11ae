"""T5 (``T5ForConditionalGeneration``: T5 v1.0 with ReLU, v1.1 and Flan-T5 with gated GELU; Raffel et al. 2020) as
tbuild's encoder-decoder: pre-norm layers with RMSNorm (T5's LayerNorm has no bias and no mean), a final norm
after each stack, no biases, one token table shared by the encoder and the decoder, no √d_model scaling of the
embeddings (§3.4 does not apply), and the pieces that are T5's own:

- Positions: the bucketed relative position bias (§2.1 of Raffel et al.), a positional scheme of its own
  (``bucketed``: one (buckets, heads) table per stack, read by every self-attention layer of the stack, as
  T5's first layer computes the bias for the others). T5 stores it in each stack's first layer.
- Attention: scores not divided by √d_k (multihead ``scaled: false``); an export of a scaled run folds 1/√d_k
  into W^Q, so any run with the bias exports.
- Output: with one table for tokens and output (v1.0), T5 multiplies the decoder's output by d_model^-0.5
  before the projection (``scale_decoder_outputs``). The factor is folded into the decoder's final norm (its
  gain times d_model^-0.5), exactly, so tbuild's output projection stays the plain tied one; v1.1 has an output
  table of its own and no factor (an untied run: ``tie_embeddings: none``, its source and target tables both
  T5's ``shared``).
- FFN: ``relu`` (or another activation) without biases (``DenseReluDense``: wi, wo), or gated
  (``gated-gelu``: ``geglu``, GELU's tanh form; ``gated-silu``: ``swiglu``): wi_0 the gate, wi_1 the linear.
- Special ids: pad 0, eos 1, unk 2, no bos; sources end with ``</s>`` and the decoder starts from pad
  (``decoder_start_token_id``), both read as the run's record (``special.py``).

Refused in one line naming the config field: another activation, a gated one tbuild has no kind for.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import nn

from tbuild.builder.resolved import resolve
from tbuild.builder.spec import Spec

from ..errors import TbuildError
from .family import FROM_HF, TO_HF, Family, refuse_field
from .maps import LAYER, SAME, Map, State, Transform, expanded, linear, norm, rule

if TYPE_CHECKING:
    from transformers import PretrainedConfig

GATED = {"gelu_new": "geglu", "silu": "swiglu"}  # a gated DenseReluDense's dense_act_fn -> tbuild's FFN kind
GATED_TO_HF = {"geglu": "gated-gelu", "swiglu": "gated-silu"}
ATTENTIONS = {"encoder": (("SelfAttention", "self_attn"),),
              "decoder": (("SelfAttention", "self_attn"), ("EncDecAttention", "cross_attn"))}


def scaled_by(factor: float) -> Transform:
    """A tensor multiplied by ``factor`` on export and divided by it on import."""
    return SAME if factor == 1.0 else Transform(lambda t: t * factor, lambda t: t / factor)


def names(spec: Spec, model: nn.Module, cls: str) -> Map:
    """T5's map of ``model``: the shared table, each stack's first-layer bias table, the layers, the final norms
    (the decoder's with the output factor folded in where the output is tied)."""
    view, d = resolve(spec.model), spec.model.d_model
    tied = spec.model.tie_embeddings == "three_way"
    out: Map = {"shared.weight": rule("src_embed.tokens.weight"),
                "encoder.embed_tokens.weight": rule("src_embed.tokens.weight"),
                "decoder.embed_tokens.weight": rule("tgt_embed.tokens.weight"),
                "lm_head.weight": rule("output.weight"),
                "encoder.final_layer_norm.weight": rule("encoder_norm.weight"),
                "decoder.final_layer_norm.weight": rule("decoder_norm.weight",
                                                        transform=scaled_by(math.sqrt(d) if tied else 1.0))}
    for stack in view.stacks:
        group = stack.groups[0]  # the export check: one kind of layer per stack
        hf, ours = f"{stack.name}.block.{LAYER}.layer", f"{stack.name}.{LAYER}"
        out[f"{stack.name}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"] = rule(
            f"{'src' if stack.name == 'encoder' else 'tgt'}_embed.positional.bias.weight")
        for k, (theirs, mine) in enumerate(ATTENTIONS[stack.name]):
            spec_of = group.attention if mine == "self_attn" else group.cross_attention
            unscale = scaled_by(1.0 if spec_of.scaled is False else stack.d_k ** -0.5)  # type: ignore[union-attr]
            for proj, w in zip("qkvo", ("w_q", "w_k", "w_v", "w_o"), strict=True):
                out |= linear(f"{hf}.{k}.{theirs}.{proj}", f"{ours}.{mine}.sublayer.{w}", bias=False,
                              transform=unscale if proj == "q" else SAME)
            out |= norm(f"{hf}.{k}.layer_norm", f"{ours}.{mine}.norm", bias=False)
        f = len(ATTENTIONS[stack.name])
        gated = group.ffn.kind in GATED_TO_HF  # type: ignore[attr-defined]
        for theirs, mine in ((("wi_0", "w1"), ("wi_1", "v"), ("wo", "w2")) if gated else (("wi", "w1"), ("wo", "w2"))):
            out |= linear(f"{hf}.{f}.DenseReluDense.{theirs}", f"{ours}.ffn.sublayer.{mine}", bias=False)
        out |= norm(f"{hf}.{f}.layer_norm", f"{ours}.ffn.norm", bias=False)
    return expanded(out, model)


def ffn_kind(config: PretrainedConfig) -> dict:
    """The spec's FFN of a T5 config's ``feed_forward_proj``; another activation: refused naming it."""
    act, gated = config.dense_act_fn, config.is_gated_act
    if gated and act in GATED:
        return {"kind": GATED[act]}
    if not gated and act in FROM_HF:
        return {"kind": FROM_HF[act], "bias": False}
    kinds = [*GATED_TO_HF.values(), *FROM_HF]
    refuse_field("feed_forward_proj", config.feed_forward_proj, f"tbuild reads {', '.join(kinds)}")
    raise AssertionError  # pragma: no cover - refuse_field raises


def check(config: PretrainedConfig) -> None:
    ffn_kind(config)


def _scales_output(config: PretrainedConfig) -> bool:
    """Whether the class multiplies the decoder's output by d_model^-0.5 (transformers 5: ``scale_decoder_outputs``;
    earlier releases: ``tie_word_embeddings``)."""
    return bool(getattr(config, "scale_decoder_outputs", config.tie_word_embeddings))


def fields(hf: nn.Module) -> tuple[dict, State]:
    """The spec's model section, and the decoder's final norm with the output factor folded in as the folder
    computes it (whether or not its output is tied: the map folds it by the tying alone)."""
    c = hf.config
    tied = hf.lm_head.weight.data_ptr() == hf.shared.weight.data_ptr()
    attention = {"kind": "multihead", "bias": False, "scaled": False}
    stack = {"heads": c.num_heads, "d_ff": c.d_ff, "d_k": c.d_kv, "d_v": c.d_kv}
    spec = {
        "kind": "encoder_decoder", "vocab_size": hf.shared.weight.size(0), "d_model": c.d_model,
        "encoder": {"layers": c.num_layers, **stack}, "decoder": {"layers": c.num_decoder_layers, **stack},
        "attention": attention, "cross_attention": dict(attention),
        "positional": {"kind": "bucketed", "buckets": c.relative_attention_num_buckets,
                       "max_distance": c.relative_attention_max_distance},
        "ffn": ffn_kind(c), "norm": {"kind": "rmsnorm", "eps": c.layer_norm_epsilon},
        "norm_placement": "pre", "final_norm": True, "scale_embeddings": False,
        "dropout": {"residual": c.dropout_rate, "embedding": c.dropout_rate, "attention": c.dropout_rate,
                    "activation": c.dropout_rate},
        "tie_embeddings": "three_way" if tied else "none",
    }
    gain = hf.decoder.final_layer_norm.weight.detach().float()
    return spec, {"decoder_norm.weight": gain * c.d_model ** -0.5 if _scales_output(c) else gain}


def one_table(model: nn.Module, spec: Spec, cls: str) -> State:
    """Nothing outside the map; an untied run whose source and target tables differ is refused (T5 has one
    ``shared`` table for both)."""
    if spec.model.tie_embeddings != "three_way" and not torch.equal(model.src_embed.tokens.weight,
                                                                    model.tgt_embed.tokens.weight):
        raise TbuildError("cannot export to hf: T5ForConditionalGeneration reads one token table for the encoder "
                          "and the decoder, and this run's src_embed and tgt_embed differ (tie_embeddings "
                          f"{spec.model.tie_embeddings}); train with tie_embeddings: three_way")
    return {}


def config(model: nn.Module, spec: Spec, key: str):  # noqa: ANN201 - a T5Config
    """The T5Config of ``model``: one width, head count and d_ff for both stacks (the export check), the bias's
    buckets, the FFN as ``feed_forward_proj``, the run's special ids."""
    from transformers import T5Config

    m, view, special = spec.model, resolve(spec.model), spec.special()
    enc, group = view.encoder, view.encoder.groups[0]  # type: ignore[union-attr]
    kind = group.ffn.kind  # type: ignore[attr-defined]
    positional = view.positional
    return T5Config(
        vocab_size=model.output.weight.size(0), d_model=m.d_model, d_kv=enc.d_k, d_ff=enc.d_ff,  # type: ignore[union-attr]
        num_layers=len(model.encoder), num_decoder_layers=len(model.decoder), num_heads=enc.heads,  # type: ignore[union-attr]
        relative_attention_num_buckets=positional.buckets,  # type: ignore[attr-defined]
        relative_attention_max_distance=positional.max_distance,  # type: ignore[attr-defined]
        dropout_rate=m.dropout.residual, layer_norm_epsilon=group.norm.eps,  # type: ignore[attr-defined]
        feed_forward_proj=GATED_TO_HF.get(kind) or TO_HF[kind], tie_word_embeddings=m.tie_embeddings == "three_way",
        pad_token_id=special.pad, eos_token_id=special.eos, decoder_start_token_id=special.start)


T5 = Family(model_types=("t5",), hf_class=lambda _c: "T5ForConditionalGeneration", check=check, fields=fields,
            names=names, config=config, extra=one_table, exports={"t5": "T5ForConditionalGeneration"})

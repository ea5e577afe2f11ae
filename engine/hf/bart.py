"""What the BART-family translation classes share (Marian, Pegasus, M2M100: ``marian.py``, ``pegasus.py``,
``m2m100.py``): their layers' names, their config fields both ways, ``generate``'s defaults and the
residual-stream rescaling that reaches their fixed LayerNorm eps.

- Layers: self-attention, (the decoder's) cross-attention ``encoder_attn``, fc1/fc2, a LayerNorm per
  sub-layer; biases everywhere (zeros where tbuild has none; an import's are tbuild's ``bias: true``). Pre-norm
  classes (Pegasus, M2M100) end each stack with a LayerNorm.
- Special ids are the run's record: config.json's pad, bos, eos and decoder start (``decoder_start_token_id``:
  the target template's first role, tbuild's BOS, Marian's PAD, M2M100's EOS), both ways.
- LayerNorm eps: these classes keep nn.LayerNorm's 1e-5, with no config field. LayerNorm_ε'(c·z) =
  LayerNorm_ε(z) for c = √(ε'/ε), so an export scales the residual stream by c (each class says where); an
  import reads 1e-5.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import nn

from tbuild.builder.resolved import resolve
from tbuild.builder.spec import Spec
from tbuild.components.weights import weight_tree

from .family import FROM_HF, TABLE_ROWS, TO_HF, refuse_field
from .folder import UnsupportedImport
from .maps import LAYER, Map, expanded, linear, norm, rule

if TYPE_CHECKING:
    from transformers import GenerationConfig, PretrainedConfig

HF_LAYER_NORM_EPS = 1e-5  # nn.LayerNorm's default, which these classes keep: no config field for it


def layers(final_norms: bool, shared: bool = True) -> Map:
    """The classes' parameters (``model.shared`` where the encoder and decoder share one table; each stack's
    final ``layer_norm`` with ``final_norms``). Position tables are no tbuild parameters: each class's own."""
    names: Map = {"model.encoder.embed_tokens.weight": rule("src_embed.tokens.weight"),
                  "model.decoder.embed_tokens.weight": rule("tgt_embed.tokens.weight"),
                  "lm_head.weight": rule("output.weight")}
    if shared:
        names["model.shared.weight"] = rule("src_embed.tokens.weight")
    for stack, attentions in (("encoder", {"self_attn": "self_attn"}),
                              ("decoder", {"self_attn": "self_attn", "cross_attn": "encoder_attn"})):
        hf, ours = f"model.{stack}.layers.{LAYER}", f"{stack}.{LAYER}"
        for mine, theirs in attentions.items():
            for w, proj in (("w_q", "q_proj"), ("w_k", "k_proj"), ("w_v", "v_proj"), ("w_o", "out_proj")):
                names |= linear(f"{hf}.{theirs}.{proj}", f"{ours}.{mine}.sublayer.{w}")
            names |= norm(f"{hf}.{theirs}_layer_norm", f"{ours}.{mine}.norm")
        names |= linear(f"{hf}.fc1", f"{ours}.ffn.sublayer.w1") | linear(f"{hf}.fc2", f"{ours}.ffn.sublayer.w2")
        names |= norm(f"{hf}.final_layer_norm", f"{ours}.ffn.norm")
        if final_norms:
            names |= norm(f"model.{stack}.layer_norm", f"{stack}_norm")
    return names


def prenorm_names(spec: Spec, model: nn.Module, cls: str) -> Map:
    """The map of a pre-norm class (Pegasus, M2M100): the layers and each stack's final LayerNorm."""
    return expanded(layers(final_norms=True, shared=spec.model.tie_embeddings == "three_way"), model)


def check_config(config: PretrainedConfig) -> None:
    """Refuse, naming the field and its value, what tbuild's encoder-decoder cannot compute."""
    if config.activation_function not in FROM_HF:
        refuse_field("activation_function", config.activation_function,
                     f"tbuild's FFN kinds for this class are {', '.join(FROM_HF)}")
    if config.model_type == "marian" and config.d_model % 2:
        refuse_field("d_model", config.d_model, "the sinusoid needs an even width")


def no_output_bias(hf: nn.Module) -> None:
    """Refuse a ``final_logits_bias`` (the one output bias of these classes) that is not zero."""
    bias = getattr(hf, "final_logits_bias", torch.zeros(1)).detach()
    if bias.any():
        raise UnsupportedImport("model weights final_logits_bias: not zero (tbuild's output projection has no bias)")


def tying(config: PretrainedConfig, shared: bool) -> str:
    """The spec's tie_embeddings for a config (``shared``: one encoder and decoder table)."""
    if config.tie_word_embeddings:
        return "three_way" if shared else "decoder"
    return "none"


def fields(hf: nn.Module, pre_norm: bool, positional: dict, shared: bool) -> dict:
    """The spec's ``model`` section of a BART-family model (``positional``: the class's own)."""
    config = hf.config
    check_config(config)
    no_output_bias(hf)
    enc, dec = hf.model.encoder, hf.model.decoder
    src_rows, tgt_rows = enc.embed_tokens.weight.size(0), dec.embed_tokens.weight.size(0)
    eps = {m.eps for m in hf.modules() if isinstance(m, nn.LayerNorm)}
    if len(eps) != 1:
        raise UnsupportedImport(f"LayerNorm eps {sorted(eps)}: tbuild's encoder-decoder has one norm eps")
    bias = {"kind": "multihead", "bias": True}
    return {
        "kind": "encoder_decoder", "vocab_size": tgt_rows, "d_model": config.d_model,
        "src_vocab_size": src_rows if src_rows != tgt_rows else None,
        "encoder": {"layers": len(enc.layers), "heads": config.encoder_attention_heads, "d_ff": config.encoder_ffn_dim},
        "decoder": {"layers": len(dec.layers), "heads": config.decoder_attention_heads, "d_ff": config.decoder_ffn_dim},
        "attention": bias, "cross_attention": dict(bias), "positional": positional,
        "ffn": {"kind": FROM_HF[config.activation_function]}, "norm": {"kind": "layernorm", "eps": eps.pop()},
        "norm_placement": "pre" if pre_norm else "post", "final_norm": pre_norm,
        "dropout": {"residual": config.dropout, "embedding": config.dropout, "attention": config.attention_dropout,
                    "activation": config.activation_dropout},
        "tie_embeddings": tying(config, shared), "scale_embeddings": bool(config.scale_embedding),
        "max_positions": config.max_position_embeddings,
    }


def config_fields(model: nn.Module, spec: Spec) -> dict[str, object]:
    """The config fields the classes share: sizes, activation, positions, dropout and the run's special ids."""
    m, view, special = spec.model, resolve(spec.model), spec.special()
    counts = weight_tree(model).layer_counts(model)
    return dict(
        d_model=m.d_model, encoder_layers=counts["encoder"], decoder_layers=counts["decoder"],
        encoder_attention_heads=view.encoder.heads, decoder_attention_heads=view.decoder.heads,
        encoder_ffn_dim=view.encoder.d_ff, decoder_ffn_dim=view.decoder.d_ff,
        activation_function=TO_HF[view.encoder.groups[0].ffn.kind],  # type: ignore[attr-defined]
        max_position_embeddings=m.max_positions or TABLE_ROWS, scale_embedding=m.scale_embeddings,
        dropout=m.dropout.residual, attention_dropout=m.dropout.attention, activation_dropout=m.dropout.activation,
        pad_token_id=special.pad, eos_token_id=special.eos, bos_token_id=special.bos,
        decoder_start_token_id=special.start, forced_eos_token_id=special.eos,
    )


def generation_config(spec: Spec, max_length: int) -> GenerationConfig:
    """``generate`` defaults that decode as tbuild: start from the record's start, never emit its pad or start,
    force EOS at the length limit, the run's beam. (HF's length penalty is |Y|^α, not tbuild's ((5+|Y|)/6)^α,
    and its limit is one max_length, not a·|X|+b: see export/parity.py.)"""
    from transformers import GenerationConfig

    special = spec.special()
    return GenerationConfig(
        decoder_start_token_id=special.start, bos_token_id=special.bos, eos_token_id=special.eos,
        pad_token_id=special.pad, forced_eos_token_id=special.eos, suppress_tokens=list(special.never) or None,
        num_beams=spec.decode.beam, length_penalty=spec.decode.alpha, max_length=max_length, do_sample=False)


def stream_scale(eps: float) -> float:
    """c with LayerNorm_1e-5(c·x) = LayerNorm_eps(x)."""
    return math.sqrt(HF_LAYER_NORM_EPS / eps)

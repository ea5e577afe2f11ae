"""Llama (``LlamaForCausalLM``) and Qwen2 (``Qwen2ForCausalLM``: Llama's layers with Q, K and V biases) as a tbuild
``decoder_only`` model: pre-norm layers with RMSNorm, a final norm, SwiGLU, RoPE, grouped K/V heads. The map,
both ways:

- Llama rotates the pairs (i, i + d_k/2) of each head (``rotate_half``), tbuild the pairs (2i, 2i+1) (Su et al.
  2021): the rows of W^Q and W^K (and their biases) are permuted within each head (``half_split``: even rows,
  then odd), so Llama's pair i is tbuild's pair i and q·k is unchanged.
- Biases: all four projections' where ``attention_bias``; Qwen2's Q, K and V (its output projection has none:
  read as a zero bias).
- No √d_model scaling (§3.4) in either class: the export folds it into an untied token table.
"""

from __future__ import annotations

import torch
from torch import nn

from tbuild.builder.resolved import resolve
from tbuild.builder.spec import Spec
from tbuild.components.specs.positional import RotarySpec

from .family import TABLE_ROWS, Family, refuse_field, scaled_tokens
from .maps import LAYER, SAME, Map, State, Transform, expanded, linear, rule
from .maps import norm as norm_map


def half_split(d_k: int) -> Transform:
    """Rows (heads·d_k, ...) reordered within each head: even rows, then odd (interleaved -> half-split RoPE)."""
    order = torch.cat([torch.arange(0, d_k, 2), torch.arange(1, d_k, 2)])

    def rows(t: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return t[torch.cat([index + h * d_k for h in range(t.size(0) // d_k)])]

    inverse = torch.argsort(order)
    return Transform(lambda t: rows(t, order), lambda t: rows(t, inverse))


def names(spec: Spec, model: nn.Module, cls: str) -> Map:
    d_k = resolve(spec.model).stacks[0].d_k
    h, ours = f"model.layers.{LAYER}", f"decoder.{LAYER}"
    att, rope = f"{ours}.self_attn.sublayer", half_split(d_k)
    out: Map = {"model.embed_tokens.weight": rule("tgt_embed.tokens.weight"), "lm_head.weight": rule("output.weight"),
                "model.norm.weight": rule("decoder_norm.weight")}
    for x, proj in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "o_proj")):
        out |= linear(f"{h}.self_attn.{proj}", f"{att}.w_{x}", transform=rope if x in "qk" else SAME)
    for ffn, proj in (("w1", "gate_proj"), ("v", "up_proj"), ("w2", "down_proj")):
        out |= linear(f"{h}.mlp.{proj}", f"{ours}.ffn.sublayer.{ffn}", bias=False)
    out |= norm_map(f"{h}.input_layernorm", f"{ours}.self_attn.norm", bias=False)
    out |= norm_map(f"{h}.post_attention_layernorm", f"{ours}.ffn.norm", bias=False)
    return expanded(out, model)


def _rope_type(config: object) -> str:
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    return rope.get("rope_type", rope.get("type", "default"))


def check(config: object) -> None:
    """Refuse, naming the field and its value, what tbuild's decoder-only model cannot compute."""
    if config.hidden_act != "silu":  # type: ignore[attr-defined]
        refuse_field("hidden_act", config.hidden_act, "tbuild's gated FFN is SwiGLU (silu)")  # type: ignore[attr-defined]
    if _rope_type(config) not in ("default", "llama3"):
        refuse_field("rope_parameters.rope_type", _rope_type(config), "tbuild's RoPE scales as Llama 3's (llama3) "
                     "or not at all (default)")
    if getattr(config, "mlp_bias", False):
        refuse_field("mlp_bias", True, "tbuild's SwiGLU has no biases")
    if getattr(config, "use_sliding_window", False):
        refuse_field("use_sliding_window", True, "tbuild's causal attention sees every earlier position")


def fields(hf: nn.Module) -> tuple[dict, State]:
    c = hf.config
    check(c)
    rope = getattr(c, "rope_parameters", None) or {}
    d_k = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    kv = c.num_key_value_heads if c.num_key_value_heads != c.num_attention_heads else None
    positional = {"kind": "rope", "base": float(rope.get("rope_theta", getattr(c, "rope_theta", 10000.0)))}
    if _rope_type(c) == "llama3":
        positional["scaling"] = {"kind": "llama3", "factor": rope["factor"], "low_freq_factor": rope["low_freq_factor"],
                                 "high_freq_factor": rope["high_freq_factor"],
                                 "original_max_positions": rope["original_max_position_embeddings"]}
    bias = c.model_type == "qwen2" or bool(c.attention_bias)  # Qwen2's Q, K and V always have one
    return {"kind": "decoder_only", "vocab_size": hf.get_output_embeddings().weight.size(0), "d_model": c.hidden_size,
            "norm_placement": "pre", "final_norm": True, "scale_embeddings": False,
            "tie_embeddings": "decoder" if c.tie_word_embeddings else "none", "positional": positional,
            "decoder": {"layers": c.num_hidden_layers, "heads": c.num_attention_heads, "d_ff": c.intermediate_size,
                        "d_k": d_k, "d_v": d_k},
            "ffn": {"kind": "swiglu"}, "norm": {"kind": "rmsnorm", "eps": c.rms_norm_eps},
            "attention": {"kind": "multihead", "bias": bias, "kv_heads": kv},
            "dropout": {"residual": 0.0, "embedding": 0.0, "attention": c.attention_dropout, "activation": 0.0},
            "max_positions": c.max_position_embeddings}, {}


def rope_parameters(rope: RotarySpec) -> dict[str, object]:
    """LlamaConfig's rope_parameters for tbuild's RoPE (θ's base, Llama 3's scaling where the spec has it)."""
    s = rope.scaling
    scaling = {} if s is None else {"factor": s.factor, "low_freq_factor": s.low_freq_factor,
                                    "high_freq_factor": s.high_freq_factor,
                                    "original_max_position_embeddings": s.original_max_positions}
    return {"rope_type": "default" if s is None else s.kind, "rope_theta": rope.base, **scaling}


def config(model: nn.Module, spec: Spec, key: str):  # noqa: ANN201 - a LlamaConfig
    import transformers

    m, stack = spec.model, resolve(spec.model).stacks[0]
    group, special = stack.groups[0], spec.special()
    return transformers.LlamaConfig(
        vocab_size=model.output.weight.size(0), hidden_size=m.d_model, intermediate_size=stack.d_ff,
        num_hidden_layers=len(model.decoder), num_attention_heads=stack.heads, head_dim=stack.d_k,
        num_key_value_heads=group.attention.kv_heads or stack.heads,  # type: ignore[attr-defined]
        hidden_act="silu", rms_norm_eps=group.norm.eps, max_position_embeddings=m.max_positions or TABLE_ROWS,  # type: ignore[attr-defined]
        rope_parameters=rope_parameters(m.positional),  # type: ignore[arg-type]
        attention_bias=group.attention.bias, mlp_bias=False,  # type: ignore[attr-defined]
        attention_dropout=m.dropout.attention, tie_word_embeddings=m.tie_embeddings != "none",
        pad_token_id=special.pad, bos_token_id=special.bos, eos_token_id=special.eos)


LLAMA = Family(model_types=("llama", "qwen2"), check=check, fields=fields, names=names,
               hf_class=lambda c: "Qwen2ForCausalLM" if c["model_type"] == "qwen2" else "LlamaForCausalLM",
               dataset=lambda _c: "text", config=config,
               finish=scaled_tokens("model.embed_tokens.weight"), exports={"llama": "LlamaForCausalLM"})

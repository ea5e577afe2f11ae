"""Import a Hugging Face ``GPT2LMHeadModel``, ``LlamaForCausalLM`` or ``Qwen2ForCausalLM`` (Llama's layers with
Q, K and V biases) as a tbuild ``decoder_only`` model: the
maps of ``export/hf_graphs.py`` (``gpt2_state``, ``llama_state``) read backwards, each step exact:

- GPT-2's ``Conv1D`` stores (in, out): transposed back; its fused ``c_attn`` is split into W^Q, W^K, W^V.
  Its position table (``wpe``) becomes ``sinusoidal`` where it is tbuild's sinusoid (§3.5, as the export writes
  it), ``none`` where it is zeros, else ``learned`` as trained.
- Llama rotates the pairs (i, i + d_k/2) of each head, tbuild the pairs (2i, 2i+1) (Su et al. 2021): the rows
  of W^Q and W^K go back from half-split to interleaved order within each head (the inverse of ``half_split``).
- No √d_model scaling (§3.4): neither class has it (the export folds it into the table).

Refused in one line naming the config field and value: an activation tbuild does not have, unscaled or
layer-scaled GPT-2 attention, a RoPE scaling other than ``default`` and Llama 3's, Llama MLP biases, Qwen2's
sliding window. Special ids other than tbuild's (PAD 0, UNK 1, BOS 2, EOS 3) are the tokenizer's to renumber or
refuse (``hf_tokenizer.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from tbuild.components.positional import sinusoid_table

from ..export.hf_activations import FROM_HF
from .hf_source import UnsupportedImport

if TYPE_CHECKING:
    from transformers import GPT2Config, LlamaConfig

CLASSES = {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}
State = dict[str, torch.Tensor]


def _refuse(field: str, value: object, why: str) -> None:
    raise UnsupportedImport(f"config.json {field} {value!r}: {why}")


def _rope_type(config: LlamaConfig) -> str:
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    return rope.get("rope_type", rope.get("type", "default"))


def check_config(config: GPT2Config | LlamaConfig) -> None:
    """Refuse, naming the field and its value, what tbuild's decoder-only model cannot compute."""
    if config.model_type == "gpt2":
        if config.activation_function not in FROM_HF:
            _refuse("activation_function", config.activation_function,
                    f"tbuild's FFN kinds for GPT-2 are {', '.join(FROM_HF)}")
        if not config.scale_attn_weights or config.scale_attn_by_inverse_layer_idx:
            _refuse("scale_attn_weights", config.scale_attn_weights, "tbuild scales attention by 1/√d_k only")
        return
    if config.hidden_act != "silu":
        _refuse("hidden_act", config.hidden_act, "tbuild's gated FFN is SwiGLU (silu)")
    if _rope_type(config) not in ("default", "llama3"):
        _refuse("rope_parameters.rope_type", _rope_type(config), "tbuild's RoPE scales as Llama 3's (llama3) or not "
                "at all (default)")
    if getattr(config, "mlp_bias", False):
        _refuse("mlp_bias", config.mlp_bias, "tbuild's SwiGLU has no biases")
    if getattr(config, "use_sliding_window", False):
        _refuse("use_sliding_window", True, "tbuild's causal attention sees every earlier position")


def _positions(table: torch.Tensor) -> tuple[dict, State]:
    if torch.allclose(table, sinusoid_table(table.size(0), table.size(1)), atol=1e-6):
        return {"kind": "sinusoidal"}, {}
    if not table.any():
        return {"kind": "none"}, {}
    return {"kind": "learned"}, {"tgt_embed.positional.embedding.weight": table}


def _gpt2_fields(hf: nn.Module) -> tuple[dict, State]:
    c = hf.config
    positional, extra = _positions(hf.transformer.wpe.weight.detach().float())
    stack = {"layers": c.n_layer, "heads": c.n_head, "d_ff": c.n_inner or 4 * c.n_embd}
    return {"positional": positional, "decoder": stack, "ffn": {"kind": FROM_HF[c.activation_function]},
            "norm": {"kind": "layernorm", "eps": c.layer_norm_epsilon},
            "attention": {"kind": "multihead", "bias": True},
            "dropout": {"residual": c.resid_pdrop, "embedding": c.embd_pdrop, "attention": c.attn_pdrop,
                        "activation": 0.0},
            "max_positions": c.n_positions}, extra


def _attention_bias(config: LlamaConfig) -> bool:
    """Llama's ``attention_bias`` (all four projections); Qwen2's Q, K and V always have one (its output
    projection none: imported as a zero bias)."""
    return config.model_type == "qwen2" or bool(config.attention_bias)


def _llama_fields(hf: nn.Module) -> tuple[dict, State]:
    c = hf.config
    rope = getattr(c, "rope_parameters", None) or {}
    d_k = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    stack = {"layers": c.num_hidden_layers, "heads": c.num_attention_heads, "d_ff": c.intermediate_size,
             "d_k": d_k, "d_v": d_k}
    kv = c.num_key_value_heads if c.num_key_value_heads != c.num_attention_heads else None
    positional = {"kind": "rope", "base": float(rope.get("rope_theta", getattr(c, "rope_theta", 10000.0)))}
    if _rope_type(c) == "llama3":
        positional["scaling"] = {"kind": "llama3", "factor": rope["factor"], "low_freq_factor": rope["low_freq_factor"],
                                 "high_freq_factor": rope["high_freq_factor"],
                                 "original_max_positions": rope["original_max_position_embeddings"]}
    return {"positional": positional,
            "decoder": stack, "ffn": {"kind": "swiglu"}, "norm": {"kind": "rmsnorm", "eps": c.rms_norm_eps},
            "attention": {"kind": "multihead", "bias": _attention_bias(c), "kv_heads": kv},
            "dropout": {"residual": 0.0, "embedding": 0.0, "attention": c.attention_dropout, "activation": 0.0},
            "max_positions": c.max_position_embeddings}, {}


def model_fields(hf: nn.Module, family: str) -> tuple[dict, State]:
    """The spec's ``model`` section for ``hf``, and the weights no map below carries (a learned table)."""
    check_config(hf.config)
    fields, extra = _gpt2_fields(hf) if family == "gpt2" else _llama_fields(hf)
    rows = hf.get_output_embeddings().weight.size(0)
    return {"kind": "decoder_only", "vocab_size": rows, "d_model": hf.config.hidden_size, "norm_placement": "pre",
            "final_norm": True, "tie_embeddings": "decoder" if hf.config.tie_word_embeddings else "none",
            "scale_embeddings": False, **fields}, extra


def interleaved(w: torch.Tensor, d_k: int) -> torch.Tensor:
    """The inverse of ``export.hf_graphs.half_split``: each head's rows from (even, odd) back to pair order."""
    order = torch.argsort(torch.cat([torch.arange(0, d_k, 2), torch.arange(1, d_k, 2)]))
    rows = torch.cat([order + h * d_k for h in range(w.size(0) // d_k)])
    return w[rows]


def _gpt2_state(t: State, layers: int) -> State:
    state = {"tgt_embed.tokens.weight": t["transformer.wte.weight"], "output.weight": t["lm_head.weight"],
             "decoder_norm.weight": t["transformer.ln_f.weight"], "decoder_norm.bias": t["transformer.ln_f.bias"]}
    for i in range(layers):
        ours, theirs = f"decoder.{i}", f"transformer.h.{i}"
        att = f"{ours}.self_attn.sublayer"
        weights = t[f"{theirs}.attn.c_attn.weight"].t().chunk(3)
        biases = t[f"{theirs}.attn.c_attn.bias"].chunk(3)
        for x, w, b in zip("qkv", weights, biases, strict=True):
            state |= {f"{att}.w_{x}.weight": w, f"{att}.w_{x}.bias": b}
        for mine, conv in ((f"{att}.w_o", "attn.c_proj"), (f"{ours}.ffn.sublayer.w1", "mlp.c_fc"),
                           (f"{ours}.ffn.sublayer.w2", "mlp.c_proj")):
            state |= {f"{mine}.weight": t[f"{theirs}.{conv}.weight"].t(), f"{mine}.bias": t[f"{theirs}.{conv}.bias"]}
        for mine, norm in (("self_attn.norm", "ln_1"), ("ffn.norm", "ln_2")):
            state |= {f"{ours}.{mine}.{p}": t[f"{theirs}.{norm}.{p}"] for p in ("weight", "bias")}
    return state


def _llama_state(t: State, layers: int, d_k: int) -> State:
    state = {"tgt_embed.tokens.weight": t["model.embed_tokens.weight"], "output.weight": t["lm_head.weight"],
             "decoder_norm.weight": t["model.norm.weight"]}
    for i in range(layers):
        ours, theirs = f"decoder.{i}", f"model.layers.{i}"
        att = f"{ours}.self_attn.sublayer"
        for x, name in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "o_proj")):
            for p in ("weight", "bias"):
                if f"{theirs}.self_attn.{name}.{p}" in t:
                    tensor = t[f"{theirs}.self_attn.{name}.{p}"]
                    state[f"{att}.w_{x}.{p}"] = interleaved(tensor, d_k) if x in "qk" else tensor
        if f"{att}.w_q.bias" in state and f"{att}.w_o.bias" not in state:  # Qwen2's: Q, K, V biases, not O's
            state[f"{att}.w_o.bias"] = torch.zeros(t[f"{theirs}.self_attn.o_proj.weight"].size(0))
        for ffn, name in (("w1", "gate_proj"), ("v", "up_proj"), ("w2", "down_proj")):
            state[f"{ours}.ffn.sublayer.{ffn}.weight"] = t[f"{theirs}.mlp.{name}.weight"]
        state[f"{ours}.self_attn.norm.weight"] = t[f"{theirs}.input_layernorm.weight"]
        state[f"{ours}.ffn.norm.weight"] = t[f"{theirs}.post_attention_layernorm.weight"]
    return state


def tbuild_state(model: nn.Module, hf: nn.Module, family: str) -> State:
    """tbuild parameter name -> tensor from ``hf`` (a tied output: the token table, once)."""
    t = {n: p.detach().float() for n, p in hf.named_parameters(remove_duplicate=False)}
    if "lm_head.weight" not in t:
        t["lm_head.weight"] = hf.get_output_embeddings().weight.detach().float()
    layers = len(model.decoder)  # type: ignore[arg-type]
    if family == "gpt2":
        return _gpt2_state(t, layers)
    return _llama_state(t, layers, model.decoder[0].self_attn.sublayer.d_k)  # type: ignore[index]

"""GPT-2 (``GPT2LMHeadModel``) as a tbuild ``decoder_only`` model: pre-norm layers with LayerNorm, a final norm,
a two-layer FFN (ReLU or GELU), learned positions, 1/√d_k scaling (§3.2.1). The map, both ways:

- GPT-2's ``Conv1D`` stores (in, out) where ``nn.Linear`` stores (out, in): transposed; its fused ``c_attn`` is
  W^Q|W^K|W^V stacked on the output axis. Biases tbuild has none of are written as zeros (an import's are
  tbuild's ``bias: true``).
- Positions: ``wpe`` holds tbuild's table (a sinusoid (§3.5) or zeros written as one; read back as
  ``sinusoidal``, ``none`` or ``learned``).
- √d_model embedding scaling (§3.4), which GPT-2 lacks, is folded into an untied token table on export.
"""

from __future__ import annotations

from torch import nn

from tbuild.builder.resolved import resolve
from tbuild.builder.spec import Spec

from .family import FROM_HF, TO_HF, Family, position_table, positions, refuse_field, scaled_tokens
from .maps import LAYER, TRANSPOSED, Map, State, expanded, linear, norm, rule


def names(spec: Spec, model: nn.Module, cls: str) -> Map:
    h, ours = f"transformer.h.{LAYER}", f"decoder.{LAYER}"
    att = f"{ours}.self_attn.sublayer"
    out: Map = {"transformer.wte.weight": rule("tgt_embed.tokens.weight"), "lm_head.weight": rule("output.weight"),
                f"{h}.attn.c_attn.weight": rule(*(f"{att}.w_{x}.weight" for x in "qkv"), transform=TRANSPOSED),
                f"{h}.attn.c_attn.bias": rule(*(f"{att}.w_{x}.bias" for x in "qkv"), optional=True)}
    out |= linear(f"{h}.attn.c_proj", f"{att}.w_o", transform=TRANSPOSED)
    out |= linear(f"{h}.mlp.c_fc", f"{ours}.ffn.sublayer.w1", transform=TRANSPOSED)
    out |= linear(f"{h}.mlp.c_proj", f"{ours}.ffn.sublayer.w2", transform=TRANSPOSED)
    out |= norm(f"{h}.ln_1", f"{ours}.self_attn.norm") | norm(f"{h}.ln_2", f"{ours}.ffn.norm")
    return expanded(out | norm("transformer.ln_f", "decoder_norm"), model)


def check(config: object) -> None:
    """Refuse, naming the field and its value, what tbuild's decoder-only model cannot compute."""
    if config.activation_function not in FROM_HF:  # type: ignore[attr-defined]
        refuse_field("activation_function", config.activation_function,  # type: ignore[attr-defined]
                     f"tbuild's FFN kinds for GPT-2 are {', '.join(FROM_HF)}")
    if not config.scale_attn_weights or config.scale_attn_by_inverse_layer_idx:  # type: ignore[attr-defined]
        refuse_field("scale_attn_weights", config.scale_attn_weights,  # type: ignore[attr-defined]
                     "tbuild scales attention by 1/√d_k only")


def fields(hf: nn.Module) -> tuple[dict, State]:
    c = hf.config
    check(c)
    positional, extra = positions(hf.transformer.wpe.weight.detach().float(), "tgt_embed")
    return {"kind": "decoder_only", "vocab_size": hf.get_output_embeddings().weight.size(0), "d_model": c.n_embd,
            "norm_placement": "pre", "final_norm": True, "scale_embeddings": False,
            "tie_embeddings": "decoder" if c.tie_word_embeddings else "none", "positional": positional,
            "decoder": {"layers": c.n_layer, "heads": c.n_head, "d_ff": c.n_inner or 4 * c.n_embd},
            "ffn": {"kind": FROM_HF[c.activation_function]}, "norm": {"kind": "layernorm", "eps": c.layer_norm_epsilon},
            "attention": {"kind": "multihead", "bias": True},
            "dropout": {"residual": c.resid_pdrop, "embedding": c.embd_pdrop, "attention": c.attn_pdrop,
                        "activation": 0.0},
            "max_positions": c.n_positions}, extra


def config(model: nn.Module, spec: Spec, key: str):  # noqa: ANN201 - a GPT2Config
    import transformers

    m, stack = spec.model, resolve(spec.model).stacks[0]
    group, special = stack.groups[0], spec.special()
    return transformers.GPT2Config(
        vocab_size=model.output.weight.size(0), n_positions=position_table(model, spec, "tgt_embed").size(0),
        n_embd=m.d_model, n_layer=len(model.decoder), n_head=stack.heads, n_inner=stack.d_ff,
        activation_function=TO_HF[group.ffn.kind], layer_norm_epsilon=group.norm.eps,  # type: ignore[attr-defined]
        resid_pdrop=m.dropout.residual, embd_pdrop=m.dropout.embedding, attn_pdrop=m.dropout.attention,
        tie_word_embeddings=m.tie_embeddings != "none", pad_token_id=special.pad, bos_token_id=special.bos,
        eos_token_id=special.eos)


def extra(model: nn.Module, spec: Spec, cls: str) -> State:
    return {"transformer.wpe.weight": position_table(model, spec, "tgt_embed")}


GPT2 = Family(model_types=("gpt2",), hf_class=lambda _c: "GPT2LMHeadModel", check=check, fields=fields,
              names=names, dataset=lambda _c: "text", config=config, extra=extra,
              finish=scaled_tokens("transformer.wte.weight"),
              exports={"gpt2": "GPT2LMHeadModel"})

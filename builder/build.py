"""``build_model(spec)``: a pure function from a validated spec to the encoder-decoder graph, by
registry look-ups alone (no file I/O, no globals)."""

from __future__ import annotations

import torch
from torch import nn

import tbuild.components.attention  # noqa: F401  (each block module registers its blocks)
import tbuild.components.feedforward  # noqa: F401
import tbuild.components.norm  # noqa: F401
import tbuild.components.positional  # noqa: F401
from tbuild.components import ATTENTION, FFN, NORM, POSITIONAL
from tbuild.components.spec_base import ComponentSpec
from tbuild.components.transformer import DecoderLayer, Embedding, EncoderDecoder, EncoderLayer, Residual

from .resolved import ResolvedStack, resolve
from .schema import ModelSpec, Spec
from .tokens import PAD


def _layers(model: ModelSpec, stack: ResolvedStack) -> list[nn.Module]:
    d, drop = model.d_model, model.dropout

    def residual(block: nn.Module, norm: ComponentSpec) -> Residual:
        return Residual(block, NORM.build(norm, d_model=d), drop.residual, model.norm_placement == "pre")

    def attention(spec: ComponentSpec, role: str) -> nn.Module:
        use = stack.use(role)
        return ATTENTION.build(spec, d_model=d, heads=use.heads, d_k=use.d_k, d_v=use.d_v,
                               dropout=drop.attention, causal=use.causal)

    layers: list[nn.Module] = []
    for group in stack.groups:
        for _ in range(group.repeat):
            self_attn = residual(attention(group.attention, "self"), group.norm)
            ff = residual(FFN.build(group.ffn, d_model=d, d_ff=stack.d_ff, dropout=drop.activation), group.norm)
            if group.cross_attention is None:
                layers.append(EncoderLayer(self_attn, ff))
            else:
                cross = residual(attention(group.cross_attention, "cross"), group.norm)
                layers.append(DecoderLayer(self_attn, cross, ff))
    return layers


def build_model(spec: Spec) -> EncoderDecoder:
    """Build the Transformer described by ``spec.model`` with freshly initialised weights (on the
    default device: under ``with torch.device("meta")`` nothing is allocated)."""
    model = spec.model
    view = resolve(model)
    d = model.d_model
    tgt_tokens = nn.Embedding(spec.vocab_size(), d, padding_idx=PAD)
    src_tokens = tgt_tokens if model.tie_embeddings == "three_way" else nn.Embedding(
        spec.src_vocab_size(), d, padding_idx=PAD)
    output = nn.Linear(d, spec.vocab_size(), bias=False)
    if model.tie_embeddings != "none":
        output.weight = tgt_tokens.weight  # one matrix for embeddings and pre-softmax projection (§3.4)

    def embedding(tokens: nn.Embedding) -> Embedding:
        positional = POSITIONAL.build(view.positional, d_model=d, max_positions=model.max_positions)
        return Embedding(tokens, positional, model.dropout.embedding, model.scale_embeddings)

    def final_norm(stack: ResolvedStack) -> nn.Module | None:
        return NORM.build(stack.final_norm, d_model=d) if stack.final_norm is not None else None

    net = EncoderDecoder(
        src_embed=embedding(src_tokens),
        tgt_embed=embedding(tgt_tokens),
        encoder=_layers(model, view.encoder),
        decoder=_layers(model, view.decoder),
        encoder_norm=final_norm(view.encoder),
        decoder_norm=final_norm(view.decoder),
        output=output,
        pad_id=PAD,
    )
    init_weights(net, d)
    return net


def init_weights(net: nn.Module, d_model: int) -> None:
    """Xavier-uniform matrices (as tensor2tensor); embeddings N(0, d_model^-0.5) so that after the
    √d_model scale (§3.4) they have unit variance, like the positional encodings they are added to."""
    for module in net.modules():
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
    for module in net.modules():  # after Linear: a tied output matrix keeps the embedding init
        if isinstance(module, nn.Embedding) and module.padding_idx is not None:
            nn.init.normal_(module.weight, std=d_model**-0.5)
            with torch.no_grad():
                module.weight[module.padding_idx].zero_()

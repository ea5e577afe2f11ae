"""``build_model(spec)``: a pure function from a validated spec to the encoder-decoder graph, by
registry look-ups alone (no file I/O, no globals)."""

from __future__ import annotations

import torch
from torch import nn

from tbuild.components import ATTENTION, FFN, NORM, POSITIONAL
from tbuild.components.transformer import DecoderLayer, Embedding, EncoderDecoder, EncoderLayer, Residual

from .schema import ModelSpec, Spec, StackSpec

PAD_ID = 0  # special ids are fixed by the tokenizer (tbuild.engine.tokenizer); pad is 0


def _layers(model: ModelSpec, stack: StackSpec, decoder: bool) -> list[nn.Module]:
    d, drop = model.d_model, model.dropout
    pre = model.norm_placement == "pre"
    assert stack.d_k is not None and stack.d_v is not None  # filled in by ModelSpec validation
    dims = dict(d_model=d, heads=stack.heads, d_k=stack.d_k, d_v=stack.d_v, dropout=drop.attention)
    layers: list[nn.Module] = []
    for group in stack.layer_groups():
        attention = group.attention or stack.attention or model.attention
        ffn = group.ffn or stack.ffn or model.ffn
        norm = group.norm or stack.norm or model.norm
        for _ in range(group.repeat):
            def residual(block: nn.Module) -> Residual:
                return Residual(block, NORM.build(norm, d_model=d), drop.residual, pre)  # noqa: B023

            self_attn = residual(ATTENTION.build(attention, causal=decoder, **dims))
            ff = residual(FFN.build(ffn, d_model=d, d_ff=stack.d_ff, dropout=drop.activation))
            if decoder:
                cross = getattr(stack, "cross_attention", None) or model.cross_attention
                layers.append(DecoderLayer(self_attn, residual(ATTENTION.build(cross, causal=False, **dims)), ff))
            else:
                layers.append(EncoderLayer(self_attn, ff))
    return layers


def build_model(spec: Spec) -> EncoderDecoder:
    """Build the Transformer described by ``spec.model`` with freshly initialised weights."""
    model = spec.model
    d = model.d_model
    tgt_tokens = nn.Embedding(spec.vocab_size(), d, padding_idx=PAD_ID)
    src_tokens = tgt_tokens if model.tie_embeddings == "three_way" else nn.Embedding(
        spec.src_vocab_size(), d, padding_idx=PAD_ID)
    output = nn.Linear(d, spec.vocab_size(), bias=False)
    if model.tie_embeddings != "none":
        output.weight = tgt_tokens.weight  # one matrix for embeddings and pre-softmax projection (§3.4)

    def embedding(tokens: nn.Embedding) -> Embedding:
        positional = POSITIONAL.build(model.positional, d_model=d, max_positions=model.max_positions)
        return Embedding(tokens, positional, model.dropout.embedding, model.scale_embeddings)

    final = model.use_final_norm
    net = EncoderDecoder(
        src_embed=embedding(src_tokens),
        tgt_embed=embedding(tgt_tokens),
        encoder=_layers(model, model.encoder, decoder=False),
        decoder=_layers(model, model.decoder, decoder=True),
        encoder_norm=NORM.build(model.encoder.norm or model.norm, d_model=d) if final else None,
        decoder_norm=NORM.build(model.decoder.norm or model.norm, d_model=d) if final else None,
        output=output,
        pad_id=PAD_ID,
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

"""Write a tbuild model as a CTranslate2 model through its Python spec API (no converter script):
one small ``set_*`` function per block copies weights into the runtime's flat spec.

Layout of the runtime (ctranslate2.specs.transformer_spec): each sub-layer owns its norm
(``self_attention.layer_norm``, ``attention.layer_norm``, ``ffn.layer_norm``), applied before the
sub-layer with ``pre_norm`` and after the residual otherwise, as tbuild's ``Residual``. Decoder
self-attention has one fused Q|K|V projection, cross-attention Q and a fused K|V. Call
``targets.check_exportable`` first: these functions assume what it guarantees.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from tbuild.builder.resolved import ResolvedStack, resolve
from tbuild.builder.schema import Spec
from tbuild.builder.tokens import BOS, EOS, UNK
from tbuild.components.positional import Learned, NoPosition, Sinusoidal, sinusoid_table
from tbuild.components.transformer import EncoderDecoder, Residual

from .targets import CTRANSLATE2, check_exportable

QUANTIZATIONS = ("float32", "int8", "int8_float32", "int16")
SINUSOID_ROWS = 1024  # positions written for sinusoidal/none when the model has no max_positions


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy()


def set_linear(spec, *linears: nn.Linear) -> None:  # noqa: ANN001 - ctranslate2 specs are untyped
    """One runtime linear from one or more tbuild projections stacked on the output dimension."""
    spec.weight = np.concatenate([_np(x.weight) for x in linears])
    if linears[0].bias is not None:
        spec.bias = np.concatenate([_np(x.bias) for x in linears])


def set_norm(spec, norm: nn.Module) -> None:  # noqa: ANN001
    spec.gamma = _np(norm.weight)
    if getattr(norm, "bias", None) is not None:  # LayerNorm; RMSNorm has a gain only
        spec.beta = _np(norm.bias)


def set_self_attention(spec, residual: Residual) -> None:  # noqa: ANN001
    attn = residual.sublayer
    set_norm(spec.layer_norm, residual.norm)
    set_linear(spec.linear[0], attn.w_q, attn.w_k, attn.w_v)  # fused Q|K|V
    set_linear(spec.linear[1], attn.w_o)


def set_cross_attention(spec, residual: Residual) -> None:  # noqa: ANN001
    attn = residual.sublayer
    set_norm(spec.layer_norm, residual.norm)
    set_linear(spec.linear[0], attn.w_q)
    set_linear(spec.linear[1], attn.w_k, attn.w_v)  # fused K|V of the memory
    set_linear(spec.linear[2], attn.w_o)


def set_ffn(spec, residual: Residual) -> None:  # noqa: ANN001
    ffn = residual.sublayer
    set_norm(spec.layer_norm, residual.norm)
    set_linear(spec.linear_0, ffn.w1)  # activated
    if hasattr(ffn, "v"):  # SwiGLU: SiLU(xW1) * xV, the runtime's linear_0_noact is V
        set_linear(spec.linear_0_noact, ffn.v)
    set_linear(spec.linear_1, ffn.w2)


def set_positions(spec, positional: nn.Module, d_model: int, rows: int) -> None:  # noqa: ANN001
    """tbuild's own table, row 0 = the first token. (The runtime's built-in sinusoid concatenates
    sin|cos halves instead of interleaving them and starts at position 1, so it is never used.)"""
    if isinstance(positional, Learned):
        spec.encodings = _np(positional.embedding.weight)
    elif isinstance(positional, Sinusoidal):
        spec.encodings = _np(sinusoid_table(rows, d_model))
    elif isinstance(positional, NoPosition):
        spec.encodings = np.zeros((rows, d_model), dtype=np.float32)
    else:  # pragma: no cover - check_exportable refuses other kinds first
        raise AssertionError(type(positional).__name__)


def _stack_options(stack: ResolvedStack, d_model: int, pre_norm: bool) -> dict:
    from ctranslate2.specs import common_spec

    group = stack.groups[0]  # check_exportable: one FFN kind, one kv_heads per stack
    ffn = group.ffn.kind
    activation = {"relu": common_spec.Activation.RELU, "gelu": common_spec.Activation.GELU,
                  "swiglu": common_spec.Activation.SWISH}[ffn]
    kv = group.attention.kv_heads or stack.heads
    return dict(pre_norm=pre_norm, no_final_norm=stack.final_norm is None, activation=activation,
                ffn_glu=ffn == "swiglu", rms_norm=group.norm.kind == "rmsnorm",
                num_heads_kv=kv if kv != stack.heads else None,
                head_dim=stack.d_k if stack.d_k * stack.heads != d_model else None)


def build_spec(model: EncoderDecoder, spec: Spec, vocabulary: list[str]):  # noqa: ANN201 - TransformerSpec
    """The runtime's TransformerSpec holding ``model``'s weights; ``vocabulary`` names each id (the
    sentencepiece pieces, ids as tbuild's: 0 pad, 1 unk, 2 bos, 3 eos)."""
    from ctranslate2.specs import transformer_spec as ts

    check_exportable(spec, CTRANSLATE2)
    view, m = resolve(spec.model), spec.model
    pre = m.norm_placement == "pre"
    d = m.d_model
    enc = ts.TransformerEncoderSpec(len(model.encoder), view.encoder.heads, **_stack_options(view.encoder, d, pre))
    dec = ts.TransformerDecoderSpec(len(model.decoder), view.decoder.heads, **_stack_options(view.decoder, d, pre))
    rows = m.max_positions or SINUSOID_ROWS

    enc.embeddings[0].weight = _np(model.src_embed.tokens.weight)
    enc.scale_embeddings = m.scale_embeddings  # × √d_model (§3.4) or not
    set_positions(enc.position_encodings, model.src_embed.positional, d, rows)
    for layer_spec, layer in zip(enc.layer, model.encoder, strict=True):
        set_self_attention(layer_spec.self_attention, layer.self_attn)
        set_ffn(layer_spec.ffn, layer.ffn)
    if model.encoder_norm is not None:
        set_norm(enc.layer_norm, model.encoder_norm)

    dec.embeddings.weight = _np(model.tgt_embed.tokens.weight)
    dec.scale_embeddings = m.scale_embeddings
    set_positions(dec.position_encodings, model.tgt_embed.positional, d, rows)
    for layer_spec, layer in zip(dec.layer, model.decoder, strict=True):
        set_self_attention(layer_spec.self_attention, layer.self_attn)
        set_cross_attention(layer_spec.attention, layer.cross_attn)
        set_ffn(layer_spec.ffn, layer.ffn)
    if model.decoder_norm is not None:
        set_norm(dec.layer_norm, model.decoder_norm)
    dec.projection.weight = _np(model.output.weight)  # tied or not, written as is

    out = ts.TransformerSpec(enc, dec)
    # tbuild sources end with EOS and have no BOS; targets start from BOS (builder/tokens.py).
    out.config.unk_token, out.config.bos_token = vocabulary[UNK], vocabulary[BOS]
    out.config.eos_token, out.config.decoder_start_token = vocabulary[EOS], vocabulary[BOS]
    out.config.add_source_eos = True
    # One epsilon for every norm (check_exportable refuses a mix); the runtime reads it from config.
    out.config.layer_norm_epsilon = view.encoder.groups[0].norm.eps
    src_rows, tgt_rows = model.src_embed.tokens.num_embeddings, model.tgt_embed.tokens.num_embeddings
    out.register_source_vocabulary(_names(vocabulary, src_rows))
    out.register_target_vocabulary(_names(vocabulary, tgt_rows))
    return out


def _names(vocabulary: list[str], rows: int) -> list[str]:
    """One name per embedding row: the vocabulary, padded with unused names if the table is larger."""
    return vocabulary[:rows] + [f"<tbuild_unused_{i}>" for i in range(len(vocabulary), rows)]


def write_ctranslate2(model: EncoderDecoder, spec: Spec, vocabulary: list[str], out: Path,
                      quantization: str | None = None) -> None:
    """Validate, optionally quantize (``QUANTIZATIONS``) and save the CTranslate2 model into ``out``."""
    ct2 = build_spec(model, spec, vocabulary)
    ct2.validate()
    ct2.optimize(quantization=quantization)
    out.mkdir(parents=True, exist_ok=True)
    ct2.save(str(out))


def export_run(run, out: Path, *, quantization: str | None = None, checkpoint: Path | None = None,  # noqa: ANN001
               average: int | None = None) -> str:
    """Write ``run``'s weights (``load_weights``: a checkpoint, an average or the default) as a
    CTranslate2 model in ``out`` with the run's sentencepiece model beside it; returns which weights."""
    import shutil

    from tbuild.builder import build_model

    from ..data.tokenizer import Tokenizer
    from ..errors import TbuildError
    from ..weights import load_weights

    check_exportable(run.spec, CTRANSLATE2)  # refuse before loading anything
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise TbuildError(f"--quantization {quantization!r}: choose one of {', '.join(QUANTIZATIONS)}")
    tok = Tokenizer.load(run.tokenizer)
    model = build_model(run.spec)
    weights = load_weights(model, run, checkpoint=checkpoint, average=average)
    write_ctranslate2(model.eval(), run.spec, [tok.sp.id_to_piece(i) for i in range(tok.vocab_size)], out,
                      quantization)
    shutil.copyfile(tok.path, out / run.dir.tokenizer.name)
    return weights

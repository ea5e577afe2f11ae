"""Import a Hugging Face ``MarianMTModel`` (post-norm), ``PegasusForConditionalGeneration`` or
``M2M100ForConditionalGeneration`` (NLLB's class; both pre-norm with final norms) as a tbuild encoder-decoder:
the config becomes the spec's fields, the weights come back through the same declared names the export writes
(``ENCODER_DECODER.exports``, components/transformer.py), read the other way.

- Marian: LayerNorm eps 1e-5 (``nn.LayerNorm``'s, which Marian keeps), post-norm, no final norms, its fixed
  sinusoid (§3.5, rebuilt on load). Marian's sinusoid puts the sin columns first, tbuild interleaves them: the
  model dimension of every weight is put back in tbuild's order (the inverse of the export's ``marian_order``).
- Pegasus: pre-norm, a final LayerNorm after each stack, one token table, and a stored position table: tbuild's
  own sinusoid (as the export writes it) becomes ``sinusoidal``, zeros ``none``, anything else (Pegasus's own
  sin-then-cos table included) ``learned`` with that table as trained. LayerNorm eps 1e-5, so nothing is rescaled.
- M2M100: Pegasus's layers and names, and a sinusoid computed on load (tensor2tensor's frequencies, sin half
  then cos half) counted from the padding id + 1: its rows from there are the ``learned`` table, exactly.

Both: attention and FFN biases as HF has them, √d_model scaling as ``scale_embedding``, tying as the config
says (encoder and decoder tables that are one table in HF but apart from the output become three equal tables,
``tie_embeddings: none``). Refused in one line naming the config field: another activation than relu or gelu,
special ids other than tbuild's (PAD 0, EOS 3, decoding from BOS 2; a Marian or M2M100 folder's are renumbered
with its tokenizer, ``opus_vocab.py``, ``m2m100_vocab.py``), a non-zero ``final_logits_bias``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from tbuild.components.positional import sinusoid_table
from tbuild.components.weights import weight_tree

from ..export.hf import _reordered, marian_order
from ..export.hf_activations import FROM_HF
from .hf_source import UnsupportedImport

if TYPE_CHECKING:
    from transformers import PretrainedConfig

CLASSES = {"marian": "MarianMTModel", "pegasus": "PegasusForConditionalGeneration",
           "m2m_100": "M2M100ForConditionalGeneration"}
EXPORT_NAMES = {"marian": "hf", "pegasus": "hf-pegasus", "m2m_100": "hf-pegasus"}  # the declared maps, per class
PRE_NORM = frozenset({"pegasus", "m2m_100"})  # pre-norm with a final LayerNorm in each stack


def check_config(config: PretrainedConfig) -> None:
    """Refuse, naming the field and its value, what tbuild's encoder-decoder cannot compute."""
    if config.activation_function not in FROM_HF:
        raise UnsupportedImport(f"config.json activation_function {config.activation_function!r}: tbuild's "
                                f"FFN kinds for this class are {', '.join(FROM_HF)}")
    if config.model_type == "marian" and config.d_model % 2:
        raise UnsupportedImport(f"config.json d_model {config.d_model}: the sinusoid needs an even width")


def _positions(hf: nn.Module, family: str, rows: int) -> tuple[dict, dict[str, torch.Tensor]]:
    """The spec's positional field and tbuild's learned tables (empty unless learned)."""
    if family == "marian":
        return {"kind": "sinusoidal"}, {}
    tables = {embed: _table(getattr(hf.model, stack).embed_positions, rows)
              for embed, stack in (("src_embed", "encoder"), ("tgt_embed", "decoder"))}
    if all(torch.allclose(t, sinusoid_table(rows, t.size(1)), atol=1e-6) for t in tables.values()):
        return {"kind": "sinusoidal"}, {}
    if all(not t.any() for t in tables.values()):
        return {"kind": "none"}, {}
    return {"kind": "learned"}, {f"{e}.positional.embedding.weight": t for e, t in tables.items()}


def _table(positions: nn.Module, rows: int) -> torch.Tensor:
    """The ``rows`` position rows a stack adds from position 0: Pegasus's stored table, or M2M100's sinusoid
    (computed on load, never saved), whose position p is row padding id + 1 + p."""
    if hasattr(positions, "weights"):  # M2M100SinusoidalPositionalEmbedding
        start = positions.padding_idx + 1
        return positions.weights.detach().float()[start:start + rows].clone()
    return positions.weight.detach().float()


def _tying(config: PretrainedConfig, family: str) -> str:
    shared = family in PRE_NORM or config.share_encoder_decoder_embeddings
    if config.tie_word_embeddings:
        return "three_way" if shared else "decoder"
    return "none"


def model_fields(hf: nn.Module, family: str) -> tuple[dict, dict[str, torch.Tensor]]:
    """The spec's ``model`` section for ``hf``, and the weights no export name carries (learned positions)."""
    config = hf.config
    check_config(config)
    silent = _silent(hf)
    enc, dec = hf.model.encoder, hf.model.decoder
    src_rows, tgt_rows = enc.embed_tokens.weight.size(0), dec.embed_tokens.weight.size(0)
    rows = config.max_position_embeddings
    positional, extra = _positions(hf, family, rows)
    eps = {m.eps for m in hf.modules() if isinstance(m, nn.LayerNorm)}
    if len(eps) != 1:
        raise UnsupportedImport(f"LayerNorm eps {sorted(eps)}: tbuild's encoder-decoder has one norm eps")
    bias = {"kind": "multihead", "bias": True}
    fields = {
        "kind": "encoder_decoder", "vocab_size": tgt_rows, "d_model": config.d_model,
        "src_vocab_size": src_rows if src_rows != tgt_rows else None,
        "encoder": {"layers": len(enc.layers), "heads": config.encoder_attention_heads, "d_ff": config.encoder_ffn_dim},
        "decoder": {"layers": len(dec.layers), "heads": config.decoder_attention_heads, "d_ff": config.decoder_ffn_dim},
        "attention": bias, "cross_attention": dict(bias), "positional": positional,
        "ffn": {"kind": FROM_HF[config.activation_function]}, "norm": {"kind": "layernorm", "eps": eps.pop()},
        "norm_placement": "post" if family == "marian" else "pre", "final_norm": family in PRE_NORM,
        "dropout": {"residual": config.dropout, "embedding": config.dropout, "attention": config.attention_dropout,
                    "activation": config.activation_dropout},
        "tie_embeddings": _tying(config, family), "scale_embeddings": bool(config.scale_embedding),
        "max_positions": rows,
    } | ({"silent_ids": silent} if silent else {})
    return fields, extra


def _silent(hf: nn.Module) -> list[int]:
    """The ids ``final_logits_bias`` never lets score (-inf: what the export writes for ``model.silent_ids``); a
    refusal where it holds another value than 0 and -inf (tbuild's output projection has no bias)."""
    bias = getattr(hf, "final_logits_bias", torch.zeros(1)).detach().flatten()
    if bias[~torch.isneginf(bias)].any():
        raise UnsupportedImport("model weights final_logits_bias: not zero (tbuild's output projection has no bias; "
                                "-inf, a row never scored, is read as model.silent_ids)")
    return torch.isneginf(bias).nonzero().flatten().tolist()


def hf_tensors(hf: nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter of ``hf`` under each of its names (tied ones too), float32."""
    return {n: p.detach().float() for n, p in hf.named_parameters(remove_duplicate=False)}


def tbuild_state(model: nn.Module, hf: nn.Module, family: str) -> dict[str, torch.Tensor]:
    """tbuild parameter name -> tensor from ``hf``, through the export map read backwards (the first HF name
    that carries a tbuild parameter gives it: a shared table once, ``model.shared`` only where no stack has its own)."""
    names = weight_tree(model).export_names(EXPORT_NAMES[family], model)
    theirs, ours = hf_tensors(hf), dict(model.named_parameters(remove_duplicate=False))
    inverse = torch.argsort(marian_order(hf.config.d_model))
    state: dict[str, torch.Tensor] = {}
    shared_last = sorted(names.items(), key=lambda item: item[0] == "model.shared.weight")  # each stack's own table
    for name, (source,) in shared_last:  # is the one its forward reads (tied to model.shared or not)
        if source not in ours or source in state or name not in theirs:
            continue
        tensor = theirs[name]
        state[source] = _reordered(name, tensor, inverse) if family == "marian" else tensor
    return state

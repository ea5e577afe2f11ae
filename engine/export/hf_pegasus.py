"""Write a pre-norm tbuild encoder-decoder as a Hugging Face ``PegasusForConditionalGeneration``: the same
pre-norm layers (x + Sublayer(LayerNorm(x))), a final LayerNorm after each stack, one token table for the
encoder, the decoder and the output (three_way tying, §3.4), √d_model embedding scaling as
``scale_embedding``, biases everywhere (zeros where tbuild has none). Two things differ, each mapped exactly:

- Positions: Pegasus stores its position table with the weights (``embed_positions``), so tbuild's own rows
  are written into it: the sinusoid of §3.5 as tbuild computes it (interleaved, so no reordering as for
  Marian), a learned table as trained, or zeros; row p is position p, from 0, as in tbuild.
- LayerNorm eps: Pegasus's is nn.LayerNorm's 1e-5, with no config field. LayerNorm_ε'(c·x) = LayerNorm_ε(x)
  for c = √(ε'/ε) (the centred input scales by c, its variance by c²), so the export scales the whole
  residual stream by c: its start (token and position tables) and all that is added to it (each sub-layer's
  output projection, out_proj and fc2, weights and biases). Every per-layer norm then sees c·x and gives
  tbuild's output; the encoder's final norm too, so the memory is unchanged. The decoder's final norm feeds
  only the output projection, which shares the c-scaled table: its weight and bias are divided by c.
  At ε = 1e-5, c = 1 and nothing is scaled.

M2M100 has the same layers but computes its positions on load (tensor2tensor's sinusoid: frequencies
10000^(-i/(D/2 - 1)), counted from the padding id + 1), which §3.5's table is not: it is not a target.
``to_pegasus`` calls ``targets.check_exportable`` first; the other functions assume what it guarantees.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch

from tbuild.builder.resolved import resolve
from tbuild.builder.spec import Spec
from tbuild.components.transformer import EncoderDecoder
from tbuild.components.weights import weight_tree

from .hf_config import generation_config, seq2seq_config, silence
from .hf_graphs import position_table
from .targets import HF, check_exportable

if TYPE_CHECKING:
    from transformers import PegasusConfig, PegasusForConditionalGeneration

NAMES = "hf-pegasus"  # the model's declared map (components/transformer.py)
TIED = frozenset({"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"})
RESIDUAL_OUTPUTS = frozenset({"out_proj", "fc2"})  # what a sub-layer adds to the residual stream


def stream_scale(hf_eps: float, eps: float) -> float:
    """c with LayerNorm_hf_eps(c·x) = LayerNorm_eps(x)."""
    return math.sqrt(hf_eps / eps)


def _factor(name: str, c: float) -> float:
    """What Pegasus's parameter ``name`` is multiplied by so that the residual stream is c times tbuild's."""
    if name == "model.shared.weight" or name.split(".")[-2] in RESIDUAL_OUTPUTS:
        return c
    return 1 / c if name.startswith("model.decoder.layer_norm.") else 1.0


def pegasus_state(model: EncoderDecoder, spec: Spec, c: float) -> Iterator[tuple[str, torch.Tensor]]:
    """(PegasusForConditionalGeneration parameter name, tensor) for every weight of ``model`` and the two
    position tables, the residual stream scaled by ``c``; the tied aliases of ``model.shared`` are skipped."""
    names = weight_tree(model).export_names(NAMES, model)
    tensors = {n: p.detach().float() for n, p in model.named_parameters(remove_duplicate=False)}
    for name, (source,) in names.items():
        if name in TIED:
            continue
        tensor = tensors.get(source)
        if tensor is None:  # a projection without bias: Pegasus's always have one
            tensor = torch.zeros(tensors[source.removesuffix(".bias") + ".weight"].size(0))
        yield name, tensor * _factor(name, c)
    for stack, embed in (("encoder", "src_embed"), ("decoder", "tgt_embed")):
        yield f"model.{stack}.embed_positions.weight", position_table(model, spec, embed) * c


def pegasus_config(model: EncoderDecoder, spec: Spec) -> PegasusConfig:
    """The PegasusConfig of ``model``: ``seq2seq_config``, one vocabulary, the output tied to it."""
    from transformers import PegasusConfig

    rows = model.tgt_embed.tokens.weight.size(0)
    fields = seq2seq_config(model, spec) | {"max_position_embeddings": position_table(model, spec, "src_embed").size(0)}
    return PegasusConfig(vocab_size=rows, tie_word_embeddings=True, **fields)


def to_pegasus(model: EncoderDecoder, spec: Spec) -> PegasusForConditionalGeneration:
    """An in-memory PegasusForConditionalGeneration holding ``model``'s weights (float32, eval mode)."""
    from transformers import PegasusForConditionalGeneration

    check_exportable(spec, HF)
    config = pegasus_config(model, spec)
    hf = PegasusForConditionalGeneration(config).eval()
    eps = resolve(spec.model).encoder.groups[0].norm.eps  # type: ignore[union-attr,attr-defined] # one eps (targets.py)
    c = stream_scale(hf.model.encoder.layer_norm.eps, eps)
    params = dict(hf.named_parameters(remove_duplicate=False))
    written = set()
    with torch.no_grad():
        for name, tensor in pegasus_state(model, spec, c):
            params[name].copy_(tensor)
            written.add(name)
        silence(hf, spec)
    missing = set(params) - written - TIED
    if missing:  # pragma: no cover - a transformers release that renamed a weight
        raise AssertionError(f"PegasusForConditionalGeneration weights not written: {', '.join(sorted(missing))}")
    hf.generation_config = generation_config(spec, config.max_position_embeddings)
    return hf

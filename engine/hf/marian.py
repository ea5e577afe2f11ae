"""Marian (``MarianMTModel``): the paper's post-norm Transformer (§3.1) with scaled embeddings (§3.4) and a fixed
sinusoid (§3.5) rebuilt on load, so the layers map one to one (``bart.layers``) with one twist: Marian's
table puts sin(pos/10000^(2i/D)) in the first half of each row and cos in the second, where tbuild interleaves
them (PE(pos, 2i) = sin, PE(pos, 2i+1) = cos). The map therefore reorders the model dimension of every weight
(``feature_order``: Marian's feature j is tbuild's feature order[j]); layer norm, attention and the FFN
commute with such a reordering, and the logits are unchanged.

LayerNorm eps (``bart.py``): the residual stream is scaled by c from each stack's first LayerNorm on, since
Marian rebuilds its sinusoid and the stack's input cannot be scaled:
- exact: every LayerNorm but the stack's first. Each LayerNorm's γ and β are multiplied by c; each sub-layer
  reading the stream divides its input weights by c (q/k/v, the cross-attention's query, fc1; not their biases)
  and multiplies what it adds by c (out_proj, fc2). The stack's last LayerNorm keeps γ and β, so the memory and
  the output are tbuild's own: the token tables are not scaled and every tying holds.
- not exact: the first LayerNorm of each stack sees tbuild's own input z with eps 1e-5 for ε: a relative
  |1e-5 − ε|/(2·var z), 4.5e-6 at ε = 1e-6 (docs/export.md; the export's parity report measures each model).
At ε = 1e-5, c = 1 and nothing is scaled; an import reads 1e-5.

The tokenizer: MarianTokenizer's files (``tokenizer.py`` writes and reads them).
"""

from __future__ import annotations

import re

import torch
from torch import nn

from tbuild.builder.resolved import resolve
from tbuild.builder.spec import Spec

from . import bart
from .family import Family
from .maps import SAME, Map, Rule, State, Transform, expanded

INTO = frozenset({"q_proj", "k_proj", "v_proj", "fc1", "shared", "embed_tokens", "lm_head"})  # model dim: input
OUT = frozenset({"out_proj", "fc2"})  # model dim: output (a norm's parameters are all model dimension)
READS = frozenset({"q_proj", "k_proj", "v_proj", "fc1"})  # a sub-layer's input projections
_LAYER = re.compile(r"model\.(encoder|decoder)\.layers\.(\d+)\.([\w.]+)\.(weight|bias)$")


def feature_order(d_model: int) -> torch.Tensor:
    """(D,) tbuild feature index of each Marian feature: the sin columns (even), then the cos ones (odd)."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def _reordering(name: str, order: torch.Tensor) -> Transform:
    """How Marian's parameter ``name`` holds the model dimension: its rows, its columns, or not at all."""
    module, param = name.split(".")[-2:]
    inverse = torch.argsort(order)
    if module in OUT or module.endswith("layer_norm"):
        return Transform(lambda t: t[order], lambda t: t[inverse])
    if module in INTO and param == "weight":
        return Transform(lambda t: t[:, order], lambda t: t[:, inverse])
    return SAME


def names(spec: Spec, model: nn.Module, cls: str) -> Map:
    """Marian's map of ``model``: the BART-family layers, every tensor in Marian's feature order."""
    order = feature_order(spec.model.d_model)
    plain = expanded(bart.layers(final_norms=False, shared=spec.model.tie_embeddings == "three_way"), model)
    return {name: Rule(r.ours, _reordering(name, order), r.optional) for name, r in plain.items()}


def stream_factor(name: str, scales: dict[str, float], counts: dict[str, int]) -> float:
    """What Marian's parameter ``name`` is multiplied by so that each stack's residual stream is, from its first
    LayerNorm on, ``scales[stack]`` (c) times tbuild's (module docstring); ``counts``: each stack's depth."""
    match = _LAYER.match(name)
    if match is None:  # token tables, output projection: the stacks' input and output keep tbuild's scale
        return 1.0
    stack, layer, path, param = match[1], int(match[2]), match[3], match[4]
    c, module = scales[stack], path.split(".")[-1]
    if path.startswith("self_attn.") and layer == 0:
        return 1.0  # reads and adds to the stack's input, which is not scaled
    if path.startswith("encoder_attn.") and module in ("k_proj", "v_proj"):
        return 1.0  # reads the encoder's memory, tbuild's own
    if module in READS:
        return 1 / c if param == "weight" else 1.0
    if module in OUT:
        return c
    last = path == "final_layer_norm" and layer == counts[stack] - 1
    return 1.0 if last else c  # a LayerNorm's γ and β: its output is the stream, but for the stack's output


def finish(state: State, spec: Spec) -> State:
    """The written tensors with each stack's stream scaled to reach Marian's eps (one eps per stack: the
    export's check)."""
    view = resolve(spec.model)
    scales = {s.name: bart.stream_scale(s.groups[0].norm.eps) for s in view.stacks}  # type: ignore[attr-defined]
    counts = {s.name: 1 + max((int(m[2]) for n in state if (m := _LAYER.match(n)) and m[1] == s.name), default=0)
              for s in view.stacks}
    return {n: t * f if (f := stream_factor(n, scales, counts)) != 1.0 else t for n, t in state.items()}


def config(model: nn.Module, spec: Spec, key: str):  # noqa: ANN201 - a MarianConfig
    """The MarianConfig of ``model``: the shared fields with each side's vocabulary and the tying."""
    from transformers import MarianConfig

    tie = spec.model.tie_embeddings
    return MarianConfig(vocab_size=model.src_embed.tokens.weight.size(0),
                        decoder_vocab_size=model.tgt_embed.tokens.weight.size(0), **bart.config_fields(model, spec),
                        share_encoder_decoder_embeddings=tie == "three_way", tie_word_embeddings=tie != "none")


def fields(hf: nn.Module) -> tuple[dict, State]:
    shared = bool(hf.config.share_encoder_decoder_embeddings)
    return bart.fields(hf, pre_norm=False, positional={"kind": "sinusoidal"}, shared=shared), {}


MARIAN = Family(model_types=("marian",), hf_class=lambda _c: "MarianMTModel", check=bart.check_config,
                fields=fields, names=names, config=config, finish=finish, exports={"marian": "MarianMTModel"})

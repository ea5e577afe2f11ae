"""BART (``BartForConditionalGeneration``) and mBART (``MBartForConditionalGeneration``): the BART-family layers
(``bart.layers``: post-norm for BART like Marian's, pre-norm with a final LayerNorm after each stack for mBART
like Pegasus's), one token table shared by both stacks, and two things of their own, both mapped exactly:

- ``layernorm_embedding``: a LayerNorm on the sum of token and position embeddings, before the dropout: tbuild's
  ``model.embedding_norm`` (``src_embed.norm``, ``tgt_embed.norm``).
- Learned positions with an offset of 2 (``BartLearnedPositionalEmbedding``: position p reads row p + 2 of a table
  of max_position_embeddings + 2 rows): tbuild's ``learned`` table is the rows from 2 on; an export writes zeros
  into the two rows no position reads.

LayerNorm eps: these classes keep nn.LayerNorm's 1e-5 with no config field (``bart.py``); an import reads 1e-5,
and the export check refuses another eps. Special ids as the folder has them (BART's ``<s>`` 0, ``<pad>`` 1,
``</s>`` 2, ``<unk>`` 3; its tokenizer adds ``<s>`` … ``</s>``; the decoder starts from ``</s>``). mBART-50's
language codes are the M2M100 way: the source's written at the start of a line, the target's given as the target
prefix (a tokenizer.json whose post-processor adds a code is refused in one line naming the token).
"""

from __future__ import annotations

import torch
from torch import nn

from tbuild.builder.spec import Spec

from . import bart
from .family import Family
from .maps import Map, State, Transform, expanded, norm, rule

OFFSET = 2  # BartLearnedPositionalEmbedding's rows before position 0
EMBEDS = (("src_embed", "encoder"), ("tgt_embed", "decoder"))
SHIFTED = Transform(lambda t: torch.cat([t.new_zeros(OFFSET, t.size(1)), t]), lambda t: t[OFFSET:].contiguous())
CLASSES = {"bart": "BartForConditionalGeneration", "mbart": "MBartForConditionalGeneration"}


def names(spec: Spec, model: nn.Module, cls: str) -> Map:
    """The BART-family layers (each stack's final norm for mBART's pre-norm), the embeddings' norms and the
    position tables, two rows shifted."""
    out = bart.layers(final_norms=spec.model.norm_placement == "pre", shared=spec.model.tie_embeddings == "three_way")
    for embed, stack in EMBEDS:
        out |= norm(f"model.{stack}.layernorm_embedding", f"{embed}.norm")
        out[f"model.{stack}.embed_positions.weight"] = rule(f"{embed}.positional.embedding.weight", transform=SHIFTED)
    return expanded(out, model)


def fields(hf: nn.Module) -> tuple[dict, State]:
    pre = hf.config.model_type == "mbart"
    spec = bart.fields(hf, pre_norm=pre, positional={"kind": "learned"}, shared=True)
    return spec | {"embedding_norm": True}, {}


def config(model: nn.Module, spec: Spec, key: str):  # noqa: ANN201 - a BartConfig or MBartConfig
    import transformers

    cls = transformers.BartConfig if key == "bart" else transformers.MBartConfig
    return cls(vocab_size=model.tgt_embed.tokens.weight.size(0), **bart.config_fields(model, spec),
               tie_word_embeddings=spec.model.tie_embeddings == "three_way")


BART = Family(model_types=tuple(CLASSES), hf_class=lambda c: CLASSES[c["model_type"]], check=bart.check_config,
              fields=fields, names=names, config=config, exports=dict(CLASSES))

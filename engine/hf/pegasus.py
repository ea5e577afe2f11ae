"""Pegasus (``PegasusForConditionalGeneration``): pre-norm layers (x + Sublayer(LayerNorm(x))), a final LayerNorm
after each stack, one token table for the encoder, the decoder and the output (an export's three_way tying,
§3.4), √d_model embedding scaling as ``scale_embedding``; the BART-family layers (``bart.layers``). Two things
are its own, each mapped exactly:

- Positions: Pegasus stores its position tables with the weights (``embed_positions``): tbuild's rows are
  written into them (the sinusoid of §3.5 as tbuild computes it, a learned table as trained, or zeros; row p
  is position p), and read back on import (``family.positions``: tbuild's sinusoid, zeros or learned).
- LayerNorm eps 1e-5 (``bart.py``): the export scales the whole residual stream by c, its start (token and
  position tables) and all that is added to it (out_proj, fc2); every norm then sees c·x and gives tbuild's
  output. The decoder's final norm feeds only the output projection, which shares the c-scaled table: its γ
  and β are divided by c. At ε = 1e-5, c = 1.
"""

from __future__ import annotations

from torch import nn

from tbuild.builder.resolved import resolve
from tbuild.builder.spec import Spec

from . import bart
from .family import Family, position_table, positions
from .maps import State

RESIDUAL_OUTPUTS = frozenset({"out_proj", "fc2"})  # what a sub-layer adds to the residual stream
EMBEDS = (("src_embed", "encoder"), ("tgt_embed", "decoder"))


def _factor(name: str, c: float) -> float:
    """What Pegasus's parameter ``name`` is multiplied by so that the residual stream is c times tbuild's."""
    if name.endswith("embed_positions.weight") or name == "model.shared.weight" \
            or name.split(".")[-2] in RESIDUAL_OUTPUTS:
        return c
    return 1 / c if name.startswith("model.decoder.layer_norm.") else 1.0


def finish(state: State, spec: Spec) -> State:
    eps = resolve(spec.model).encoder.groups[0].norm.eps  # type: ignore[union-attr,attr-defined] # one eps
    c = bart.stream_scale(eps)
    return state if c == 1.0 else {n: t * _factor(n, c) for n, t in state.items()}


def extra(model: nn.Module, spec: Spec, cls: str) -> State:
    """The two position tables Pegasus stores: tbuild's own rows."""
    return {f"model.{stack}.embed_positions.weight": position_table(model, spec, embed) for embed, stack in EMBEDS}


def config(model: nn.Module, spec: Spec, key: str):  # noqa: ANN201 - a PegasusConfig
    from transformers import PegasusConfig

    fields = bart.config_fields(model, spec) | {"max_position_embeddings": position_table(model, spec, "src_embed")
                                                .size(0)}
    return PegasusConfig(vocab_size=model.tgt_embed.tokens.weight.size(0), tie_word_embeddings=True, **fields)


def fields(hf: nn.Module) -> tuple[dict, State]:
    """The spec's fields and the learned tables (both stacks' stored positions: one kind for both)."""
    tables = {embed: getattr(hf.model, stack).embed_positions.weight.detach().float() for embed, stack in EMBEDS}
    found = [positions(t, embed) for embed, t in tables.items()]
    kinds = {f["kind"] for f, _ in found}
    positional = found[0][0] if len(kinds) == 1 else {"kind": "learned"}
    extra_state = {f"{e}.positional.embedding.weight": t for e, t in tables.items()} \
        if positional["kind"] == "learned" else {}
    return bart.fields(hf, pre_norm=True, positional=positional, shared=True), extra_state


PEGASUS = Family(model_types=("pegasus",), hf_class=lambda _c: "PegasusForConditionalGeneration",
                 check=bart.check_config, fields=fields, names=bart.prenorm_names, config=config, extra=extra,
                 finish=finish,
                 exports={"pegasus": "PegasusForConditionalGeneration"})

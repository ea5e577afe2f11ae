"""A run as a Hugging Face folder of the class the export check chose (``key``: marian, gpt2, bert_sequence, …),
through its family (``family.py``), with the run's special ids and tokenizer. Call the export check first: these
functions assume what it guarantees."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from tbuild.builder.spec import Spec

from . import bart
from .families import EXPORTS
from .family import tensors
from .maps import to_hf as mapped
from .tokenizer import write_tokenizer

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from ..data.tokenizer import Tokenizer
    from ..run.directory import Run

TRANSLATORS = frozenset({"marian", "pegasus", "bart", "mbart"})  # MarianTokenizer's files (a sentencepiece run)
SEQ2SEQ = TRANSLATORS | {"t5"}  # generate's defaults of an encoder-decoder (bart.generation_config)
SPIECE = frozenset({"t5"})  # a sentencepiece model as T5Tokenizer's spiece.model
MAX_LENGTH = 512  # the tokenizer's model_max_length for a class without position rows (T5's, as published)


def _untied(hf: PreTrainedModel, model: nn.Module) -> None:
    """Give ``hf`` an output table of its own where its class ties it to the input table but the run does not
    (transformers 5's T5 always ties; a v1.1 run's output is its own)."""
    out, tokens = hf.get_output_embeddings(), getattr(model, "tgt_embed", None)
    if out is None or tokens is None or model.output.weight is tokens.tokens.weight:
        return
    if out.weight is hf.get_input_embeddings().weight:
        out.weight = nn.Parameter(out.weight.detach().clone())


def max_length(hf: PreTrainedModel) -> int:
    """The longest input the folder's class reads: its position rows, or ``MAX_LENGTH`` for relative positions."""
    return getattr(hf.config, "max_position_embeddings", None) or MAX_LENGTH


def to_hf(model: nn.Module, spec: Spec, key: str) -> PreTrainedModel:
    """An in-memory Hugging Face model of export ``key``'s class holding ``model``'s weights (float32, eval)."""
    import transformers

    family = EXPORTS[key]
    cls = family.exports[key]
    assert family.config is not None  # every family with export keys has a config
    hf = getattr(transformers, cls)(family.config(model, spec, key)).eval()
    _untied(hf, model)
    theirs = {n: p.shape for n, p in hf.named_parameters()}  # tied aliases once: their first name
    state = family.finish(mapped(family.names(spec, model, cls), tensors(model), theirs)
                          | family.extra(model, spec, cls), spec)
    params = dict(hf.named_parameters())
    missing = {n for n in params if n not in state and ".embed_positions." not in n}  # Marian's: rebuilt on load
    if missing or set(state) - set(params):  # pragma: no cover - a transformers release that renamed a weight
        raise AssertionError(f"{cls} weights not matched: {sorted(missing | (set(state) - set(params)))}")
    with torch.no_grad():
        for n, tensor in state.items():
            params[n].copy_(tensor)
        if hasattr(hf, "final_logits_bias"):
            hf.final_logits_bias.zero_()  # type: ignore[operator] # tbuild's output has no bias
    if key in SEQ2SEQ:
        hf.generation_config = bart.generation_config(spec, max_length(hf))
    elif hf.can_generate():  # a language model: greedy, banning what tbuild's search bans (Specials.generating)
        from transformers import GenerationConfig

        special = spec.special()
        hf.generation_config = GenerationConfig(bos_token_id=special.bos, eos_token_id=special.eos,
                                                pad_token_id=special.pad, do_sample=False, num_beams=1,
                                                suppress_tokens=list(special.generating().never) or None)
    return hf


def write_hf(model: nn.Module, spec: Spec, key: str, tok: Tokenizer, out: Path, *, bos_first: bool = False) -> str:
    """Save the ``to_hf`` folder and the run's tokenizer files into ``out`` (``bos_first``: whether the run's
    task starts its rows with BOS); returns the class."""
    from transformers.utils import logging

    hf = to_hf(model.eval(), spec, key)
    out.mkdir(parents=True, exist_ok=True)
    logging.disable_progress_bar()  # no "Writing model shards" bar in the command's output
    hf.save_pretrained(str(out))
    rows = max(p.size(0) for n, p in model.named_parameters() if n.endswith("tokens.weight"))
    write_tokenizer(tok, spec, out, max_length(hf), rows=rows, marian=key in TRANSLATORS, spiece=key in SPIECE,
                    bos_first=bos_first)
    return type(hf).__name__


def load_for_hf(run: Run, refuse: Callable[[], object], checkpoint: Path | None, average: int | None,
                target: str = "hf") -> tuple[nn.Module, Tokenizer, str]:
    """``run``'s model in eval mode with its weights (``load_weights``), its tokenizer and which weights;
    ``refuse`` and a missing transformers package raise before anything is loaded."""
    from tbuild.builder import build_model

    from ..data.tokenizer import run_tokenizer
    from ..extras import require
    from ..run.weights import load_weights

    refuse()
    require("transformers", "tbuild[export]", f"--to {target}")  # the classes (and CTranslate2's converter)
    tok = run_tokenizer(run.tokenizer, run.spec)
    model = build_model(run.spec)
    weights = load_weights(model, run, checkpoint=checkpoint, average=average)
    return model.eval(), tok, weights

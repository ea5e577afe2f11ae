"""The spelling table of a model's character-aware input (``model.char_input``, components/char_input.py):
each piece's characters, read from the run's tokenizer and written into the built model when a run starts,
as train.init's tensors are (``Initial``); checkpoints then carry it with the weights."""

from __future__ import annotations

import torch

from tbuild.builder import build_model
from tbuild.builder.spec import Spec
from tbuild.components.char_input import CharInput

from ..data.tokenizer import Tokenizer
from .values import Patch


def spelling_patches(spec: Spec, tokenizer: Tokenizer) -> dict[str, Patch]:
    """The spelling table of each character input of ``spec``'s model, by buffer name (none without
    ``model.char_input``). Control, unknown and unused pieces (PAD, BOS, EOS, UNK) have no characters."""
    if spec.model.char_input is None:
        return {}
    with torch.device("meta"):  # names and sizes only: nothing allocated
        model = build_model(spec)
    sp = tokenizer.sp
    pieces: list[str | None] = [None if sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i)
                                else sp.id_to_piece(i) for i in range(tokenizer.vocab_size)]
    patches = {}
    for name, module in model.named_modules():
        if isinstance(module, CharInput):
            rows = module.spelling.shape[0]  # model.vocab_size may exceed the tokenizer's: those rows stay empty
            patches[f"{name}.spelling"] = Patch(module.spell((pieces + [None] * rows)[:rows]))
    return patches

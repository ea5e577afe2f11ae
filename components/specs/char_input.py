"""Specs of the character-aware inputs (``tbuild.components.char_input``): each input piece's characters
pooled into one vector that joins the piece's embedding, so that a word never seen in training still shows
its spelling (affixes, capitals, digits, hyphens). Torch-free. Declared at ``model.char_input``; none by
default. A piece's characters are the UTF-8 bytes of its string in the run's tokenizer (``▁`` marking a
word's start included), a table written into the model when a run starts; the data pipeline is unchanged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from ..registry import CHAR_INPUT
from ..spec_base import ComponentSpec, Use


@CHAR_INPUT.declare
class CharCNNSpec(ComponentSpec):
    """A character CNN (Ma & Hovy 2016 §2.1): each piece's bytes embedded, one convolution over them, max-pooled
    over the piece into one vector, which is projected to d_model and added to the piece's embedding
    (``combine: add``) or concatenated with it and projected back to d_model (``concat``). Feeds the
    encoder's input (of an encoder_decoder or encoder_only model)."""

    kind: Literal["char_cnn"] = "char_cnn"
    dim: int = Field(30, ge=1, description="Width of a character's embedding (Ma & Hovy: 30).")
    filters: int = Field(30, ge=1, description="Convolution filters: the width of a piece's pooled vector "
                         "(Ma & Hovy: 30).")
    width: int = Field(3, ge=1, description="Characters each filter sees (Ma & Hovy: 3; odd keeps it centred).")
    max_chars: int = Field(16, ge=1, description="A piece's bytes read at most (the rest are cut off).")
    combine: Literal["add", "concat"] = Field(
        "add", description="add: the projected vector is added to the piece's embedding; concat: the two are "
        "concatenated and projected to d_model.")
    pool: Literal["piece", "word"] = Field(
        "piece", description="piece: the maximum over the piece's own characters; word: over every character of "
        "the word the piece belongs to (its pieces from the one that starts with ▁), Ma & Hovy's per-word "
        "vector given to each of the word's pieces.")

    def check(self, uses: Sequence[Use]) -> None:
        if not any(use.stack == "encoder" for use in uses):
            raise ValueError("char_input feeds the encoder's input, and this model has no encoder (a decoder_only "
                             "model): remove model.char_input")

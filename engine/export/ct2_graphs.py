"""Write a decoder-only model as a CTranslate2 ``Generator`` folder through CTranslate2's own converter
(``ctranslate2.converters.TransformersConverter``) from the Hugging Face class that holds it exactly
(``hf_graphs.py``: GPT-2 or Llama). The converter reads the vocabulary from a tokenizer; tbuild's is a
sentencepiece model with its own ids, so the converter is handed tbuild's pieces in id order instead, and
CTranslate2's tokens are tbuild's ids one to one."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from torch import nn

from tbuild.builder.spec import Spec
from tbuild.builder.tokens import BOS, EOS, UNK

from .ctranslate2 import silent_bias
from .hf_graphs import to_hf_graph

if TYPE_CHECKING:
    from ctranslate2.specs.model_spec import LanguageModelSpec


@dataclass
class Pieces:
    """What the converter's loaders read from a tokenizer: the pieces by id and the special tokens."""

    pieces: list[str]

    def get_vocab(self) -> dict[str, int]:
        return {p: i for i, p in enumerate(self.pieces)}

    @property
    def bos_token(self) -> str:
        return self.pieces[BOS]

    @property
    def eos_token(self) -> str:
        return self.pieces[EOS]

    @property
    def unk_token(self) -> str:
        return self.pieces[UNK]


def piece_names(vocabulary: list[str], rows: int) -> list[str]:
    """One name per embedding row: the tokenizer's pieces, then placeholders for rows past it."""
    return vocabulary + [f"<tbuild_unused_{i}>" for i in range(len(vocabulary), rows)]


def write_ct2_graph(model: nn.Module, spec: Spec, vocabulary: list[str], out: Path,
                    quantization: str = "float32") -> None:
    """Convert ``model`` (decoder-only; ``targets.check_exportable`` first) into ``out`` at ``quantization``."""
    from ctranslate2.converters import TransformersConverter

    scored = spec.model.model_copy(update={"silent_ids": []})  # the class in between scores every row; the
    hf = to_hf_graph(model.eval(), spec.model_copy(update={"model": scored}))  # projection's bias silences them
    names = piece_names(vocabulary, hf.config.vocab_size)
    eps = getattr(hf.config, "layer_norm_epsilon", None) or hf.config.rms_norm_eps

    class Converter(TransformersConverter):
        def load_tokenizer(self, tokenizer_class: type, model_name_or_path: str, **kwargs: object) -> Pieces:
            return Pieces(names)

        def _load(self) -> LanguageModelSpec:  # GPT-2's loader leaves CTranslate2's default eps (1e-5)
            converted = super()._load()
            converted.config.layer_norm_epsilon = eps
            bias = silent_bias(spec, hf.config.vocab_size)
            if bias is not None:
                converted.decoder.projection.bias = bias
            return converted

    with tempfile.TemporaryDirectory() as tmp:
        hf.save_pretrained(tmp)
        Converter(tmp).convert(str(out), quantization=None if quantization == "float32" else quantization,
                               force=True)

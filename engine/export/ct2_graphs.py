"""Write a decoder-only model as a CTranslate2 ``Generator`` folder through CTranslate2's own converter from the
Hugging Face class that holds it exactly (``engine/hf/writer.py``), handed the run's pieces in id order and its
special tokens for a tokenizer, so CTranslate2's tokens are the run's ids one to one."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from torch import nn

from tbuild.builder.spec import Spec
from tbuild.components.specs.special import Specials

from ..hf.tokenizer import row_names
from ..hf.writer import to_hf

if TYPE_CHECKING:
    from ctranslate2.specs.model_spec import LanguageModelSpec


@dataclass
class Pieces:
    """What the converter's loaders read from a tokenizer: the run's pieces by id and its special tokens."""

    pieces: list[str]
    special: Specials

    def get_vocab(self) -> dict[str, int]:
        return {p: i for i, p in enumerate(self.pieces)}

    @property
    def bos_token(self) -> str:
        return self.pieces[self.special.start]

    @property
    def eos_token(self) -> str:
        return self.pieces[self.special.stop]

    @property
    def unk_token(self) -> str:
        return self.pieces[self.special.unk if self.special.unk is not None else self.special.stop]


def write_ct2_graph(model: nn.Module, spec: Spec, key: str, vocabulary: list[str], out: Path,
                    quantization: str = "float32") -> None:
    """Convert ``model`` (decoder-only; ``targets.check_exportable`` first) through the class of export ``key``
    into ``out`` at ``quantization``."""
    from ctranslate2.converters import TransformersConverter

    hf = to_hf(model.eval(), spec, key)
    names, special = row_names(vocabulary, hf.config.vocab_size), spec.special()
    eps = getattr(hf.config, "layer_norm_epsilon", None) or hf.config.rms_norm_eps

    class Converter(TransformersConverter):
        def load_tokenizer(self, tokenizer_class: type, model_name_or_path: str, **kwargs: object) -> Pieces:
            return Pieces(names, special)

        def _load(self) -> LanguageModelSpec:  # GPT-2's loader leaves CTranslate2's default eps (1e-5)
            converted = super()._load()
            converted.config.layer_norm_epsilon = eps
            return converted

    with tempfile.TemporaryDirectory() as tmp:
        hf.save_pretrained(tmp)
        Converter(tmp).convert(str(out), quantization=None if quantization == "float32" else quantization,
                               force=True)

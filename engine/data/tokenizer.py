"""A shared source+target sentencepiece model (§5.1) with the ids of engine/tokens.py."""

from __future__ import annotations

import os
import random
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm

from tbuild.builder.schema import TokenizerSpec

from .corpus import DataError
from ..tokens import BOS, EOS, PAD, UNK

_SPECIAL = {"pad": PAD, "unk": UNK, "bos": BOS, "eos": EOS}
_SKIP_ON_DECODE = frozenset({PAD, BOS, EOS})


class Tokenizer:
    """Subword ids in, text out. Build with ``Tokenizer.train`` or ``Tokenizer.load``."""

    def __init__(self, processor: spm.SentencePieceProcessor, path: Path) -> None:
        self.sp = processor
        self.path = path

    @property
    def vocab_size(self) -> int:
        return int(self.sp.get_piece_size())

    @classmethod
    def train(
        cls, sentences: Iterable[str], spec: TokenizerSpec, model_prefix: Path, seed: int = 1
    ) -> Tokenizer:
        """Train on ``sentences`` (at most ``spec.max_sentences``, a seeded sample); write
        ``<model_prefix>.model`` and ``.vocab``. Deterministic for the same input and seed."""
        lines = [s for s in sentences if s]
        if spec.max_sentences is not None and len(lines) > spec.max_sentences:
            keep = sorted(random.Random(seed).sample(range(len(lines)), spec.max_sentences))
            lines = [lines[i] for i in keep]
        if not lines:
            raise DataError("cannot train a tokenizer: no non-empty training sentences")
        model_prefix.parent.mkdir(parents=True, exist_ok=True)
        spm.set_random_generator_seed(seed)
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(lines),
                model_prefix=str(model_prefix),
                model_type=spec.kind,
                vocab_size=spec.vocab_size,
                character_coverage=spec.character_coverage,
                **{f"{name}_id": value for name, value in _SPECIAL.items()},
                num_threads=max(1, min(os.cpu_count() or 1, 16)),
                minloglevel=2,
            )
        except RuntimeError as e:
            reason = str(e).split("] ", 1)[-1].strip() or str(e)
            raise DataError(
                f"data.tokenizer: sentencepiece training failed on {len(lines)} sentences: {reason}"
            ) from None
        return cls.load(Path(f"{model_prefix}.model"))

    @classmethod
    def load(cls, path: Path) -> Tokenizer:
        """Load a ``.model`` file; it must use pad=0, unk=1, bos=2, eos=3."""
        if not path.is_file():
            raise DataError(f"tokenizer model not found: {path}")
        try:
            processor = spm.SentencePieceProcessor(model_file=str(path))
        except (RuntimeError, OSError) as e:
            raise DataError(f"{path}: not a valid sentencepiece model ({str(e).strip()})") from None
        actual = {"pad": processor.pad_id(), "unk": processor.unk_id(),
                  "bos": processor.bos_id(), "eos": processor.eos_id()}
        if actual != _SPECIAL:
            got = ", ".join(f"{k}={v}" for k, v in actual.items())
            want = " ".join(f"--{k}_id={v}" for k, v in _SPECIAL.items())
            raise DataError(f"{path}: special ids are {got}; tbuild needs a model trained with {want}")
        return cls(processor, path)

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Subword ids per text, without BOS/EOS."""
        return self.sp.encode(list(texts), out_type=int)

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids``; PAD, BOS and EOS are skipped wherever they occur."""
        return self.sp.decode([int(i) for i in ids if int(i) not in _SKIP_ON_DECODE])

    def decode_batch(self, batch: list[list[int]]) -> list[str]:
        return [self.decode(ids) for ids in batch]

    def __repr__(self) -> str:
        return f"Tokenizer({self.path}, vocab_size={self.vocab_size})"

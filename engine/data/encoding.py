"""Encoding chunks of parallel lines into flat id arrays, in worker processes. Torch-free, so a
worker starts in a fraction of a second."""

from __future__ import annotations

from itertools import chain
from pathlib import Path

import numpy as np
import sentencepiece as spm

from tbuild.builder.tokens import EOS

from . import tokenizers_file

_PROCESSOR: spm.SentencePieceProcessor | None = None

Encoded = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # src ids, src lengths, tgt ids, tgt lengths


def init_worker(model_file: str) -> None:
    """Load the sentencepiece model (or an imported model's tokenizers file) once per worker process."""
    global _PROCESSOR
    if model_file.endswith(tokenizers_file.SUFFIX):
        _PROCESSOR = tokenizers_file.TokenizersProcessor(Path(model_file))  # type: ignore[assignment]
        return
    _PROCESSOR = spm.SentencePieceProcessor(model_file=model_file)


def encode_chunk(sources: list[str], targets: list[str]) -> Encoded:
    """Both sides' ids, each row followed by EOS, flattened, with the rows' lengths (EOS counted)."""
    assert _PROCESSOR is not None, "init_worker first"
    return (*_flat(_PROCESSOR.encode(sources, out_type=int)), *_flat(_PROCESSOR.encode(targets, out_type=int)))


def _flat(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    ids = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum()))
    return np.insert(ids, np.cumsum(lengths), EOS), lengths + 1  # EOS after every row

"""Encoding chunks of parallel lines into flat id arrays, in worker processes. Torch-free, so a
worker starts in a fraction of a second."""

from __future__ import annotations

from itertools import chain
from pathlib import Path

import numpy as np
import sentencepiece as spm

from tbuild.components.specs.special import Specials

from . import tokenizers_file

_PROCESSOR: spm.SentencePieceProcessor | None = None
_SPECIAL: Specials | None = None  # what each side adds around its pieces

Encoded = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # src ids, src lengths, tgt ids, tgt lengths


def init_worker(model_file: str, special: Specials) -> None:
    """Load the sentencepiece model (or an imported model's tokenizers file) once per worker process, with
    the vocabulary's special ids."""
    global _PROCESSOR, _SPECIAL
    _SPECIAL = special
    if model_file.endswith(tokenizers_file.SUFFIX):
        _PROCESSOR = tokenizers_file.TokenizersProcessor(Path(model_file))  # type: ignore[assignment]
        return
    _PROCESSOR = spm.SentencePieceProcessor(model_file=model_file)


def encode_chunk(sources: list[str], targets: list[str]) -> Encoded:
    """Both sides' ids, flattened, with the rows' lengths (what is added counted): each source with what the
    vocabulary adds around a source (tbuild's: EOS after it), each target followed by EOS."""
    assert _PROCESSOR is not None and _SPECIAL is not None, "init_worker first"
    source, target = _SPECIAL.around("source"), _SPECIAL.around("target")
    return (*_flat(_PROCESSOR.encode(sources, out_type=int), *source),
            *_flat(_PROCESSOR.encode(targets, out_type=int), [], target[1]))


def _flat(rows: list[list[int]], before: list[int], after: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The rows' ids, each with ``before`` and ``after`` around it, flattened, and each row's length."""
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    ids = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum()))
    added, n = len(before) + len(after), len(rows)
    out = np.empty(len(ids) + added * n, dtype=np.int64)
    out[np.arange(len(ids)) + np.repeat(np.arange(n) * added, lengths) + len(before)] = ids
    starts = np.cumsum(lengths + added) - (lengths + added)  # each row's first column in ``out``
    for j, i in enumerate(before):
        out[starts + j] = i
    for j, i in enumerate(after):
        out[starts + len(before) + lengths + j] = i
    return out, lengths + added

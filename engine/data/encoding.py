"""Encoding chunks of parallel lines into flat id arrays, in worker processes. Torch-free, so a
worker starts in a fraction of a second."""

from __future__ import annotations

from itertools import chain
from pathlib import Path
from typing import NamedTuple

import numpy as np
import sentencepiece as spm

from tbuild.components.specs.special import Specials

from . import tokenizers_file

_PROCESSOR: spm.SentencePieceProcessor | None = None
_SPECIAL: Specials | None = None  # what each side adds around its pieces

Encoded = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # src ids, src lengths, tgt ids, tgt lengths


class Sampled(NamedTuple):
    """A chunk encoded with sentencepiece's sampling (``data.tokenizer.sampling``, ``sampled.py``): its ``alpha``
    and ``nbest`` (-1: the whole lattice; a BPE model ignores it) and the seed of each side."""

    alpha: float
    nbest: int
    seeds: tuple[int, int]  # source, target


def init_worker(model_file: str, special: Specials) -> None:
    """Load the sentencepiece model (or an imported model's tokenizers file) once per worker process, with
    the vocabulary's special ids."""
    global _PROCESSOR, _SPECIAL
    _SPECIAL = special
    if model_file.endswith(tokenizers_file.SUFFIX):
        _PROCESSOR = tokenizers_file.TokenizersProcessor(Path(model_file))  # type: ignore[assignment]
        return
    _PROCESSOR = spm.SentencePieceProcessor(model_file=model_file)


def encode_chunk(sources: list[str], targets: list[str], sampled: Sampled | None = None) -> Encoded:
    """Both sides' ids, flattened, with the rows' lengths (what is added counted): each source with what the
    vocabulary adds around a source (tbuild's: EOS after it), each target followed by EOS; ``sampled``: each side
    a sampled segmentation, drawn from its seed."""
    assert _PROCESSOR is not None and _SPECIAL is not None, "init_worker first"
    source, target = _SPECIAL.around("source"), _SPECIAL.around("target")
    return (*_flat(_encode(sources, sampled, 0), *source), *_flat(_encode(targets, sampled, 1), [], target[1]))


def _encode(texts: list[str], sampled: Sampled | None, side: int) -> list[list[int]]:
    """The ids of ``texts``: the best segmentation, or one sampled from side ``side``'s seed. A batch call starts
    its own threads, each seeding its generator from the seed set when it starts: one thread reads the texts in
    order, so the ids depend on the seed alone (several would share the texts as they come)."""
    assert _PROCESSOR is not None
    if sampled is None:
        return _PROCESSOR.encode(texts, out_type=int)
    spm.set_random_generator_seed(sampled.seeds[side])
    return _PROCESSOR.encode(texts, out_type=int, enable_sampling=True, alpha=sampled.alpha,
                             nbest_size=sampled.nbest, num_threads=1)


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

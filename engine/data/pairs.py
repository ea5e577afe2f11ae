"""Encoded parallel data in memory: a validation or test split, read and encoded whole."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from tbuild.builder.spec import Spec

from .corpus import layout_of, split_paths
from .datasets import read_split
from .tokenizer import Tokenizer

Log = Callable[[str], None]


@dataclass
class Pairs:
    """Encoded parallel data in memory (a ``BatchSource``). ``src`` rows hold what the vocabulary adds around a
    source (tbuild's: EOS after it), ``tgt`` rows end with EOS; the trainer feeds ``[start] + tgt[:-1]`` to
    the decoder and predicts ``tgt``."""

    src: list[list[int]]
    tgt: list[list[int]]

    def __len__(self) -> int:
        return len(self.src)

    @cached_property
    def src_lengths(self) -> np.ndarray:
        return np.fromiter(map(len, self.src), dtype=np.int64, count=len(self.src))

    @cached_property
    def tgt_lengths(self) -> np.ndarray:
        return np.fromiter(map(len, self.tgt), dtype=np.int64, count=len(self.tgt))

    def padded(self, indices: np.ndarray, side: str, pad: int) -> np.ndarray:
        rows = [(self.src if side == "src" else self.tgt)[i] for i in indices.tolist()]
        out = np.full((len(rows), max(map(len, rows), default=0)), pad, dtype=np.int64)
        for r, ids in enumerate(rows):
            out[r, : len(ids)] = ids
        return out


def load_pairs(spec: Spec, split: str, tok: Tokenizer, log: Log) -> Pairs:
    """Read and encode a split whole, unfiltered (validation and test sets; training data is
    prepared once into memory-mapped arrays by ``prepare.py``, which applies the filters)."""
    source, target = read_split(spec.data, split, log)
    unit = layout_of(spec.data).unit  # a language model's text: lines (EOS-only sources)
    log(f"data.{split}: {len(source)} {unit} from {', '.join(map(str, split_paths(spec.data, split)))}")
    special = tok.special
    return Pairs([special.wrap(s) for s in tok.encode(source)], [t + [special.stop] for t in tok.encode(target)])

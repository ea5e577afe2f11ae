"""Encoded parallel data for the trainer: a split read, encoded and (for training) filtered."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from tbuild.builder.schema import Spec
from tbuild.builder.tokens import EOS

from ..errors import DataError
from .corpus import split_files
from .datasets import read_split
from .tokenizer import Tokenizer

Log = Callable[[str], None]


@dataclass
class Pairs:
    """Encoded parallel data in memory (a ``BatchSource``). ``src`` and ``tgt`` rows end with EOS;
    the trainer feeds ``[BOS] + tgt[:-1]`` to the decoder and predicts ``tgt``."""

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


def load_pairs(spec: Spec, split: str, tok: Tokenizer, log: Log, *, filter: bool) -> Pairs:
    """Read and encode a split. With ``filter`` (training) drop empty pairs, pairs with a side longer
    than data.max_length tokens (EOS counted) and pairs over data.max_length_ratio."""
    source, target = read_split(spec.data, split, log)
    src_path, tgt_path = split_files(spec.data, split)
    src_ids, tgt_ids = tok.encode(source), tok.encode(target)
    if not filter:
        log(f"data.{split}: {len(source)} pairs from {src_path}, {tgt_path}")
        return Pairs([s + [EOS] for s in src_ids], [t + [EOS] for t in tgt_ids])
    max_len, ratio = spec.data.max_length, spec.data.max_length_ratio
    dropped = {"empty": 0, "long": 0, "ratio": 0}
    pairs = Pairs([], [])
    for s, t in zip(src_ids, tgt_ids, strict=True):
        if not s or not t:
            dropped["empty"] += 1
        elif len(s) + 1 > max_len or len(t) + 1 > max_len:
            dropped["long"] += 1
        elif ratio is not None and max(len(s), len(t)) / min(len(s), len(t)) > ratio:
            dropped["ratio"] += 1
        else:
            pairs.src.append(s + [EOS])
            pairs.tgt.append(t + [EOS])
    summary = (f"dropped {dropped['empty']} empty, {dropped['long']} longer than {max_len} tokens, "
               f"{dropped['ratio']} over length ratio {ratio if ratio is not None else '-'}")
    log(f"data.{split}: kept {len(pairs)} of {len(source)} pairs from {src_path}, {tgt_path}; {summary}")
    if not pairs.src:
        raise DataError(f"data.{split}: no pairs left after filtering ({summary})")
    return pairs

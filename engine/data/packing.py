"""Packed training batches (``train.packing``): each row holds several pairs end to end, their sources in
the source row and their targets in the target row, every row ``length`` tokens and every batch ``rows``
rows, so all batches share one shape and the computed tokens are nearly all real ones. The model keeps
the pairs apart (``components/packing.py``): pair k of a row is segment k on both sides.

A batch is an (N, 2) int array of (pair index, row within the batch). Which pairs go together depends
only on (seed, epoch), so a resumed run reads the same batches.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from tbuild.components.specs.special import Specials

from .batches import IGNORED, BatchSource

OPEN_ROWS = 16  # rows still open to a pair that fits (first fit among them); the oldest closes when full


def pack_length(src_lens: np.ndarray, tgt_lens: np.ndarray, multiple: int = 8) -> int:
    """The row length of a data set: its longest side, rounded up to ``multiple``."""
    longest = max(int(np.max(src_lens, initial=1)), int(np.max(tgt_lens, initial=1)))
    return -(-longest // multiple) * multiple


def pair_indices(batch: np.ndarray) -> np.ndarray:
    """The pair indices of a batch: a packed batch's first column, a plain batch itself."""
    return batch[:, 0] if batch.ndim == 2 else batch


def packed_batches(src_lens: Sequence[int] | np.ndarray, tgt_lens: Sequence[int] | np.ndarray, length: int,
                   rows: int, *, seed: int, epoch: int) -> list[np.ndarray]:
    """The epoch's packed batches: the pairs in an order drawn from (seed, epoch), each put in the first of
    the ``OPEN_ROWS`` open rows where both its sides fit (a new row when none has room), rows taken in
    the order they close, ``rows`` to a batch (the last batch may have fewer). A pair longer than
    ``length`` on either side is a ValueError (``pack_length`` gives a length every pair fits)."""
    src, tgt = np.asarray(src_lens, dtype=np.int64), np.asarray(tgt_lens, dtype=np.int64)
    if len(src) and max(int(src.max()), int(tgt.max())) > length:
        raise ValueError(f"a pair of {int(src.max())}/{int(tgt.max())} tokens does not fit rows of {length}")
    order = list(range(len(src)))
    random.Random(f"tbuild-packing:{seed}:{epoch}").shuffle(order)
    closed: list[list[int]] = []
    open_rows: list[tuple[list[int], list[int]]] = []  # (pairs, [source room, target room])
    for i in order:
        s, t = int(src[i]), int(tgt[i])
        row = next((r for r in open_rows if r[1][0] >= s and r[1][1] >= t), None)
        if row is None:
            if len(open_rows) == OPEN_ROWS:
                closed.append(open_rows.pop(0)[0])
            row = ([], [length, length])
            open_rows.append(row)
        row[0].append(i)
        row[1][0] -= s
        row[1][1] -= t
    closed += [pairs for pairs, _ in open_rows]
    return [np.array([(i, r) for r, pairs in enumerate(closed[start:start + rows]) for i in pairs], dtype=np.int64)
            for start in range(0, len(closed), rows)]


def collate_packed(source: BatchSource, batch: np.ndarray, length: int, rows: int,
                   special: Specials) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """(src, tgt_in, tgt_out, src_pad, src_segments, tgt_segments), each (rows, length): the pairs of each row
    end to end, tgt_in each pair's target shifted right behind its own start (BOS, §3.1) and not fed its EOS,
    segment k + 1 for the row's k-th pair, segment 0 (padding: ``special.fill``, ``IGNORED`` in tgt_out, True
    in src_pad) after the last. Rows past the batch's are empty."""
    shape = (rows, length)
    src, tgt_in = (np.full(shape, special.fill, dtype=np.int64) for _ in range(2))
    tgt_out = np.full(shape, IGNORED, dtype=np.int64)
    src_seg, tgt_seg = np.zeros(shape, dtype=np.int64), np.zeros(shape, dtype=np.int64)
    pairs = pair_indices(batch)
    src_rows, tgt_rows = source.padded(pairs, "src", special.fill), source.padded(pairs, "tgt", IGNORED)
    src_lens, tgt_lens = source.src_lengths[pairs], source.tgt_lengths[pairs]
    at = np.zeros((rows, 2), dtype=np.int64)  # next free column of each row, source and target
    count = np.zeros(rows, dtype=np.int64)
    for k, r in enumerate(batch[:, 1]):
        s, t = int(src_lens[k]), int(tgt_lens[k])
        (a, b), count[r] = at[r], count[r] + 1
        src[r, a:a + s], src_seg[r, a:a + s] = src_rows[k, :s], count[r]
        tgt_out[r, b:b + t], tgt_seg[r, b:b + t] = tgt_rows[k, :t], count[r]
        tgt_in[r, b] = special.start
        tgt_in[r, b + 1:b + t] = tgt_rows[k, :t - 1]
        at[r] += (s, t)
    return tuple(torch.from_numpy(a) for a in (src, tgt_in, tgt_out, src_seg == 0, src_seg, tgt_seg))  # type: ignore[return-value]

"""Token-budget batches of similar-length pairs (§5.1: ~25000 source and target tokens each), cut
from any ``BatchSource``: encoded pairs in memory (``Pairs``) or memory-mapped (``MappedPairs``)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from tbuild.builder.tokens import BOS, PAD


class BatchSource(Protocol):
    """Encoded pairs that batches are cut from. Rows end with EOS; lengths count it."""

    @property
    def src_lengths(self) -> np.ndarray: ...  # (N,) source tokens per pair

    @property
    def tgt_lengths(self) -> np.ndarray: ...  # (N,) target tokens per pair

    def __len__(self) -> int: ...

    def padded(self, indices: np.ndarray, side: str, pad: int) -> np.ndarray:
        """(B, longest) int64 ids of the ``side`` ("src" or "tgt") rows ``indices``, right-padded."""
        ...


def token_batches(src_lens: Sequence[int] | np.ndarray, tgt_lens: Sequence[int] | np.ndarray, batch_tokens: int,
                  *, seed: int, epoch: int, shuffle: bool = True) -> list[np.ndarray]:
    """Batches of pair indices, sorted by (target, source) length so padding is small.

    A batch's padded size (longest × count) stays within ``batch_tokens`` on both sides; a pair that
    alone exceeds it is a batch of its own. With ``shuffle``, equal lengths are tie-broken at random
    (so batches change per epoch) and the batch order is shuffled; both depend only on (seed, epoch).
    """
    src, tgt = np.asarray(src_lens), np.asarray(tgt_lens)
    if src.shape != tgt.shape:
        raise ValueError(f"src_lens has {len(src)} entries but tgt_lens has {len(tgt)}")
    if batch_tokens < 1:
        raise ValueError(f"batch_tokens must be positive, got {batch_tokens}")
    if len(src) == 0:
        return []
    rng = random.Random(f"tbuild-batches:{seed}:{epoch}")  # str seeds hash stably (sha512)
    wide = max(int(src.max()), int(tgt.max())) >= 1 << 16
    key = (tgt.astype(np.uint64) << 32 | src.astype(np.uint64)) if wide else \
        (tgt.astype(np.uint32) << 16 | src.astype(np.uint32))
    if shuffle:
        noise = np.fromiter((rng.random() for _ in range(len(src))), dtype=np.float64, count=len(src))
        by_noise = np.argsort(noise)
        order = by_noise[np.argsort(key[by_noise], kind="stable")]  # by (target, source) length, then noise
    else:
        order = np.argsort(key, kind="stable")  # equal lengths keep their index order
    cuts = _cuts(src[order].astype(np.int64), tgt[order].astype(np.int64), batch_tokens)
    # The epoch's batches are views of one index array: int32 halves what a large corpus keeps resident.
    batches = np.split(order.astype(np.int32) if len(order) < 1 << 31 else order, cuts)
    if shuffle:
        rng.shuffle(batches)
    return batches


def _cuts(src: np.ndarray, tgt: np.ndarray, budget: int) -> list[int]:
    """Where the pairs (sorted by target length) split into batches: each batch grows while
    (count · longest) ≤ budget on both sides; a pair over the budget alone is a batch of its own.
    Both products only grow with the count, so a batch's size is the first count that breaks the
    budget, found in one vectorised look at a window of at most budget / (its first target length)."""
    cuts: list[int] = []
    start, n = 0, len(src)
    while start < n:
        window = max(1, budget // max(int(tgt[start]), 1))
        count = np.arange(1, min(window, n - start) + 1)
        fits = (tgt[start:start + len(count)] * count <= budget) & \
            (np.maximum.accumulate(src[start:start + len(count)]) * count <= budget)
        size = len(count) if fits.all() else max(1, int(np.argmin(fits)))
        start += size
        cuts.append(start)
    return cuts[:-1]


class BatchCursor:
    """The training batches, epoch after epoch, from a data position (epoch, index into the epoch's
    batches). ``shard = (rank, world)``: this process takes the batches rank, rank + world, ... of each
    epoch, and every shard gets the same number per epoch (a remainder is left out), so all processes
    step together; (0, 1) takes every batch. ``per_update`` (a multiple of world; default world): each epoch keeps a
    whole number of updates of that many batches, so an update never straddles two epochs and the
    batch sequence is the same whatever the number of shards."""

    def __init__(self, src_lens: Sequence[int] | np.ndarray, tgt_lens: Sequence[int] | np.ndarray,
                 batch_tokens: int, *, seed: int, epoch: int = 0, index: int = 0,
                 shard: tuple[int, int] = (0, 1), per_update: int | None = None) -> None:
        rank, world = shard
        per_update = per_update or world
        if not 0 <= rank < world:
            raise ValueError(f"shard rank {rank} is not in 0..{world - 1}")
        if per_update % world:
            raise ValueError(f"per_update ({per_update}) is not a multiple of world ({world})")
        self.src_lens, self.tgt_lens = src_lens, tgt_lens
        self.batch_tokens, self.seed, self.shard, self.per_update = batch_tokens, seed, shard, per_update
        self.epoch, self.index = epoch, index
        self.batches = self._epoch_batches()

    def _epoch_batches(self) -> list[np.ndarray]:
        rank, world = self.shard
        batches = token_batches(self.src_lens, self.tgt_lens, self.batch_tokens, seed=self.seed, epoch=self.epoch)
        per_shard = len(batches) // self.per_update * self.per_update // world
        if per_shard == 0:
            raise ValueError(f"{len(batches)} batches per epoch cannot feed {world} processes "
                             f"{self.per_update // world} batches each per update")
        return batches[rank::world][:per_shard]

    def next(self) -> np.ndarray:
        """The next batch's pair indices; moves to the next epoch after the last."""
        batch = self.batches[self.index]
        self.index += 1
        if self.index == len(self.batches):
            self.epoch, self.index = self.epoch + 1, 0
            self.batches = self._epoch_batches()
        return batch


def collate(source: BatchSource, indices: Sequence[int] | np.ndarray, pad: int = PAD) -> tuple[Tensor, Tensor, Tensor]:
    """(src, tgt_in, tgt_out) as right-padded (B, S), (B, T), (B, T) long tensors;
    tgt_in = [BOS] + tgt[:-1] (teacher forcing, §3.1 "shifted right"), tgt_out = tgt."""
    rows = np.asarray(indices, dtype=np.int64)
    src, tgt = source.padded(rows, "src", pad), source.padded(rows, "tgt", pad)
    tgt_in = np.full_like(tgt, pad)
    if tgt.shape[1]:
        tgt_in[:, 0] = BOS
        tgt_in[:, 1:] = tgt[:, :-1]
        tgt_in[np.arange(tgt.shape[1])[None, :] >= source.tgt_lengths[rows][:, None]] = pad  # EOS is not fed
    return torch.from_numpy(src), torch.from_numpy(tgt_in), torch.from_numpy(tgt)

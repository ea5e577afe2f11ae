"""Token-budget batches of similar-length pairs (§5.1: ~25000 source and target tokens each)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch
from torch import Tensor

from tbuild.builder.tokens import BOS, PAD

from .pairs import Pairs


def token_batches(
    src_lens: Sequence[int],
    tgt_lens: Sequence[int],
    batch_tokens: int,
    *,
    seed: int,
    epoch: int,
    shuffle: bool = True,
) -> list[list[int]]:
    """Batches of pair indices, sorted by (target, source) length so padding is small.

    A batch's padded size (longest × count) stays within ``batch_tokens`` on both sides; a pair that
    alone exceeds it is a batch of its own. With ``shuffle``, equal lengths are tie-broken at random
    (so batches change per epoch) and the batch order is shuffled; both depend only on (seed, epoch).
    """
    if len(src_lens) != len(tgt_lens):
        raise ValueError(f"src_lens has {len(src_lens)} entries but tgt_lens has {len(tgt_lens)}")
    if batch_tokens < 1:
        raise ValueError(f"batch_tokens must be positive, got {batch_tokens}")
    rng = random.Random(f"tbuild-batches:{seed}:{epoch}")  # str seeds hash stably (sha512)
    if shuffle:
        noise = [rng.random() for _ in range(len(src_lens))]
        order = sorted(range(len(src_lens)), key=lambda i: (tgt_lens[i], src_lens[i], noise[i]))
    else:
        order = sorted(range(len(src_lens)), key=lambda i: (tgt_lens[i], src_lens[i], i))
    batches: list[list[int]] = []
    batch: list[int] = []
    max_src = max_tgt = 0
    for i in order:
        s, t = max(max_src, src_lens[i]), max(max_tgt, tgt_lens[i])
        if batch and (s * (len(batch) + 1) > batch_tokens or t * (len(batch) + 1) > batch_tokens):
            batches.append(batch)
            batch, s, t = [], src_lens[i], tgt_lens[i]
        batch.append(i)
        max_src, max_tgt = s, t
    if batch:
        batches.append(batch)
    if shuffle:
        rng.shuffle(batches)
    return batches


class BatchCursor:
    """The training batches, epoch after epoch, from a data position (epoch, index into the epoch's
    batches). ``shard = (rank, world)``: this process takes the batches rank, rank + world, ... of each
    epoch, and every shard gets the same number per epoch (a remainder is left out), so all processes
    step together; (0, 1) takes every batch."""

    def __init__(self, src_lens: Sequence[int], tgt_lens: Sequence[int], batch_tokens: int, *, seed: int,
                 epoch: int = 0, index: int = 0, shard: tuple[int, int] = (0, 1)) -> None:
        rank, world = shard
        if not 0 <= rank < world:
            raise ValueError(f"shard rank {rank} is not in 0..{world - 1}")
        self.src_lens, self.tgt_lens = src_lens, tgt_lens
        self.batch_tokens, self.seed, self.shard = batch_tokens, seed, shard
        self.epoch, self.index = epoch, index
        self.batches = self._epoch_batches()

    def _epoch_batches(self) -> list[list[int]]:
        rank, world = self.shard
        batches = token_batches(self.src_lens, self.tgt_lens, self.batch_tokens, seed=self.seed, epoch=self.epoch)
        per_shard = len(batches) // world
        if per_shard == 0:
            raise ValueError(f"{len(batches)} batches per epoch cannot feed {world} processes")
        return batches[rank::world][:per_shard]

    def next(self) -> list[int]:
        """The next batch's pair indices; moves to the next epoch after the last."""
        batch = self.batches[self.index]
        self.index += 1
        if self.index == len(self.batches):
            self.epoch, self.index = self.epoch + 1, 0
            self.batches = self._epoch_batches()
        return batch


def _padded(rows: list[list[int]], pad: int) -> Tensor:
    width = max((len(r) for r in rows), default=0)
    return torch.tensor([r + [pad] * (width - len(r)) for r in rows], dtype=torch.long).view(len(rows), width)


def collate(pairs: Pairs, indices: list[int], pad: int = PAD) -> tuple[Tensor, Tensor, Tensor]:
    """(src, tgt_in, tgt_out) as right-padded (B, S), (B, T), (B, T) long tensors;
    tgt_in = [BOS] + tgt[:-1], tgt_out = tgt."""
    tgt = [pairs.tgt[i] for i in indices]
    return (
        _padded([pairs.src[i] for i in indices], pad),
        _padded([[BOS] + t[:-1] for t in tgt], pad),
        _padded(tgt, pad),
    )

"""Token-budget batches of similar-length pairs (§5.1: ~25000 source and target tokens each), cut
from any ``BatchSource``: encoded pairs in memory (``Pairs``) or memory-mapped (``MappedPairs``)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from tbuild.components.specs.special import Specials

IGNORED = -100  # a target position past its row's length: no loss, no accuracy (never a vocabulary id)


class BatchSource(Protocol):
    """Encoded pairs that batches are cut from: sources with what the vocabulary adds around them, targets
    ending with EOS; lengths count what is added."""

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


def epoch_rows(source: BatchSource, epoch: int) -> range:
    """The rows an epoch's batches are cut from: every row, or where ``source`` stacks sampled variants of the
    training split (``variants``: each one's rows, ``data.tokenizer.sampling``) variant epoch mod K's."""
    variants = getattr(source, "variants", ())
    if not variants:
        return range(len(source))
    k = epoch % len(variants)
    start = sum(variants[:k])
    return range(start, start + variants[k])


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
    batch sequence is the same whatever the number of shards. ``cut(epoch)``: the epoch's batches (default:
    ``token_batches``; packed rows: ``packing.packed_batches``), a function of the epoch alone."""

    def __init__(self, src_lens: Sequence[int] | np.ndarray, tgt_lens: Sequence[int] | np.ndarray,
                 batch_tokens: int, *, seed: int, epoch: int = 0, index: int = 0,
                 shard: tuple[int, int] = (0, 1), per_update: int | None = None,
                 cut: Callable[[int], list[np.ndarray]] | None = None) -> None:
        rank, world = shard
        per_update = per_update or world
        if not 0 <= rank < world:
            raise ValueError(f"shard rank {rank} is not in 0..{world - 1}")
        if per_update % world:
            raise ValueError(f"per_update ({per_update}) is not a multiple of world ({world})")
        self.src_lens, self.tgt_lens = src_lens, tgt_lens
        self.batch_tokens, self.seed, self.shard, self.per_update = batch_tokens, seed, shard, per_update
        self.cut = cut or (lambda epoch: token_batches(src_lens, tgt_lens, batch_tokens, seed=seed, epoch=epoch))
        self.epoch, self.index = epoch, index
        self.batches = self._epoch_batches()

    def _epoch_batches(self) -> list[np.ndarray]:
        rank, world = self.shard
        batches = self.cut(self.epoch)
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


@dataclass(frozen=True)
class Bucketing:
    """How far a batch's tensors are padded past its longest row, so that an epoch shows few distinct
    (rows B, source length S, target length T) shapes: GPU kernels (cuDNN/cuBLAS plans, compiled graphs)
    are planned per shape, so every new shape costs a plan or a recompile.

    Lengths are rounded up to a multiple of ``pad_multiple`` (never past ``max_len``, the model's
    position limit, when the true length is within it); the row count is rounded up to one of
    ``row_steps`` geometric steps per doubling (≤ 1/row_steps extra rows; 0 keeps the exact count).
    The batches themselves (which pairs) do not change, and the token budget bounds the unpadded
    batch: padding adds at most (pad_multiple - 1) columns and B/row_steps rows on top of it."""

    pad_multiple: int = 1
    row_steps: int = 0
    max_len: int | None = None

    def __post_init__(self) -> None:
        if self.pad_multiple < 1:
            raise ValueError(f"pad_multiple must be >= 1, got {self.pad_multiple}")
        if self.row_steps < 0 or self.row_steps & (self.row_steps - 1):
            raise ValueError(f"row_steps must be 0 or a power of two, got {self.row_steps}")

    def length(self, n: int) -> int:
        """The padded length of a side whose longest row has ``n`` tokens."""
        padded = -(-n // self.pad_multiple) * self.pad_multiple
        if self.max_len is not None and n <= self.max_len < padded:
            return self.max_len
        return padded

    def rows(self, n: int) -> int:
        """The padded row count of a batch of ``n`` pairs: n rounded up to a multiple of
        2^(⌊log2 n⌋ - log2 row_steps), so there are ``row_steps`` sizes per doubling."""
        if self.row_steps == 0 or n <= self.row_steps:
            return n
        unit = 1 << max(0, n.bit_length() - self.row_steps.bit_length())
        return -(-n // unit) * unit

    def describe(self) -> str:
        """The rule in words, e.g. "lengths padded to multiples of 8, rows to 8 sizes per doubling"."""
        if self == EXACT or (self.pad_multiple == 1 and self.row_steps == 0):
            return "exact shapes"
        lengths = f"lengths padded to multiples of {self.pad_multiple}" if self.pad_multiple > 1 else "exact lengths"
        rows = f"rows to {self.row_steps} sizes per doubling" if self.row_steps else "exact rows"
        return f"{lengths}, {rows}"

    def shape(self, src_longest: int, tgt_longest: int, count: int) -> tuple[int, int, int]:
        """(B, S, T) of the padded batch."""
        return self.rows(count), self.length(src_longest), self.length(tgt_longest)


EXACT = Bucketing()


def batch_shapes(src_lens: Sequence[int] | np.ndarray, tgt_lens: Sequence[int] | np.ndarray,
                 batches: Sequence[np.ndarray], bucketing: Bucketing = EXACT) -> set[tuple[int, int, int]]:
    """The distinct padded (B, S, T) shapes of ``batches``."""
    src, tgt = np.asarray(src_lens), np.asarray(tgt_lens)
    return {bucketing.shape(int(src[b].max()), int(tgt[b].max()), len(b)) for b in batches if len(b)}


def collate(source: BatchSource, indices: Sequence[int] | np.ndarray, special: Specials,
            bucketing: Bucketing = EXACT) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(src, tgt_in, tgt_out, src_pad) as right-padded (B, S), (B, T), (B, T) long tensors and the (B, S) bool
    source padding (True past each row's length): tgt_in = [start] + tgt[:-1] (teacher forcing, §3.1
    "shifted right", from ``special.start``), tgt_out = tgt, ``IGNORED`` past each row. Padding is told by the
    rows' lengths: ids there are ``special.fill``, which nothing unmasked reads.

    ``bucketing`` pads the shape further (see ``Bucketing``): extra columns are padding, and an extra row is
    a one-token source (not padding: an all-padding row would give its encoder queries no key to attend to,
    softmax over only −inf is NaN, and NaN · 0 gradients stay NaN) with a start-only input and no target, so it
    carries no loss and contributes no gradient."""
    rows, fill = np.asarray(indices, dtype=np.int64), special.fill
    src, tgt = source.padded(rows, "src", fill), source.padded(rows, "tgt", IGNORED)
    src_len, tgt_len = source.src_lengths[rows].astype(np.int64), source.tgt_lengths[rows].astype(np.int64)
    tgt_in = np.full_like(tgt, fill)
    if tgt.shape[1]:
        tgt_in[:, 0] = special.start
        tgt_in[:, 1:] = tgt[:, :-1]
        tgt_in[np.arange(tgt.shape[1])[None, :] >= tgt_len[:, None]] = fill  # EOS is not fed
    if bucketing != EXACT and len(rows):
        b, s, t = bucketing.shape(src.shape[1], tgt.shape[1], len(rows))
        src, tgt_in = (np.pad(a, ((0, b - a.shape[0]), (0, n - a.shape[1])), constant_values=fill)
                       for a, n in ((src, max(s, 1)), (tgt_in, t)))
        tgt = np.pad(tgt, ((0, b - tgt.shape[0]), (0, t - tgt.shape[1])), constant_values=IGNORED)
        src_len = np.concatenate([src_len, np.ones(b - len(rows), dtype=np.int64)])
        if t:
            tgt_in[len(rows):, 0] = special.start
    pad = np.arange(src.shape[1])[None, :] >= src_len[:, None]
    return torch.from_numpy(src), torch.from_numpy(tgt_in), torch.from_numpy(tgt), torch.from_numpy(pad)

"""The trainer's batches: which pairs go together and the tensors they make.

Two ways, one interface (``cut`` an epoch, ``collate`` a batch, ``describe`` the shapes):
- token-budget batches of similar lengths (§5.1), padded to bucketed shapes (``data/batches.py``);
- packed rows (``train.packing``, ``data/packing.py``): every batch ``rows`` × ``length``, one shape.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from tbuild.builder.spec import TrainSpec
from tbuild.components.specs.special import Specials

from ..data.batches import BatchSource, Bucketing, batch_shapes, collate, epoch_rows, token_batches
from ..data.packing import collate_packed, pack_length, packed_batches
from ..errors import TbuildError


class Batching:
    """How ``pairs`` are cut into batches and collated, by ``cfg`` (batch_tokens, seed, packing) and the
    ``default`` (pad_multiple, row_steps) of the device; ``max_len`` is the model's position limit, ``special``
    the vocabulary's ids the batches start and pad with."""

    def __init__(self, pairs: BatchSource, cfg: TrainSpec, default: tuple[int, int], max_len: int | None,
                 special: Specials) -> None:
        self.pairs, self.batch_tokens, self.seed, self.special = pairs, cfg.batch_tokens, cfg.seed, special
        pad_multiple, row_steps = default
        self.bucketing = Bucketing(pad_multiple if cfg.pad_multiple is None else cfg.pad_multiple,
                                   row_steps if cfg.row_steps is None else cfg.row_steps, max_len=max_len)
        self.length = pack_length(pairs.src_lengths, pairs.tgt_lengths) if cfg.packing else None
        self.rows = max(1, cfg.batch_tokens // self.length) if self.length else 0

    def cut(self, epoch: int) -> list[np.ndarray]:
        """The epoch's batches, a function of (seed, epoch) alone: of every pair, or of sampled data's variant
        epoch mod K (``epoch_rows``), cut from its lengths and given the rows' indices in the stack."""
        rows = epoch_rows(self.pairs, epoch)
        src, tgt = self.pairs.src_lengths[rows.start:rows.stop], self.pairs.tgt_lengths[rows.start:rows.stop]
        if self.length is None:
            batches = token_batches(src, tgt, self.batch_tokens, seed=self.seed, epoch=epoch)
        else:
            batches = packed_batches(src, tgt, self.length, self.rows, seed=self.seed, epoch=epoch)
        return _shifted(batches, rows.start, len(self.pairs))

    def collate(self, batch: np.ndarray) -> tuple[torch.Tensor, ...]:
        """(src, tgt_in, tgt_out, src_pad), and for packed rows the source and target segment ids after them."""
        if self.length is None:
            return collate(self.pairs, batch, self.special, bucketing=self.bucketing)
        return collate_packed(self.pairs, batch, self.length, self.rows, self.special)

    def describe(self, batches: list[np.ndarray]) -> str:
        """The shapes of an epoch's ``batches`` in words."""
        if self.length is None:
            shapes = batch_shapes(self.pairs.src_lengths, self.pairs.tgt_lengths, batches, self.bucketing)
            return f"{len(shapes):,} batch shapes an epoch ({self.bucketing.describe()})"
        real = sum(int(self.pairs.src_lengths[b[:, 0]].sum() + self.pairs.tgt_lengths[b[:, 0]].sum()) for b in batches)
        share = real / max(1, 2 * len(batches) * self.rows * self.length)
        return f"packed rows: {self.rows} × {self.length} tokens a batch, {100 * share:.1f}% of them real"

    def check(self, model: nn.Module) -> None:
        """Refuse a model whose positional scheme cannot read packed rows, or whose table is shorter than a
        row (one line naming train.packing)."""
        if self.length is None:
            return
        for side in ("src_embed", "tgt_embed"):
            positional = getattr(model, side).positional
            if positional.packed(torch.zeros(1, 1, dtype=torch.long)) is None:
                raise TbuildError(f"train.packing: the positional scheme {type(positional).__name__} cannot read "
                                  "packed rows; set train.packing: false")
            table = getattr(positional, "table_length", None)
            if table is not None and table < self.length:
                raise TbuildError(f"train.packing: rows of {self.length} tokens (the longest pair) exceed the "
                                  f"{table} positions of {type(positional).__name__}; raise model.max_positions")


def _shifted(batches: list[np.ndarray], start: int, total: int) -> list[np.ndarray]:
    """``batches`` of rows counted from ``start``: their pair indices (a packed batch's first column) plus it."""
    if start == 0:
        return batches
    dtype = np.int32 if total < 1 << 31 else np.int64
    shift = [start, 0]  # a packed batch: (pair index, row within the batch)
    return [b.astype(np.promote_types(b.dtype, dtype), copy=False) + (start if b.ndim == 1 else np.array(shift))
            for b in batches]

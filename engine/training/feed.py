"""The training batches, collated ahead of the step that needs them.

On a GPU the host must queue the next step's work while the current one runs: a batch collated (padded
to its bucketed shape) and pinned on a worker thread, then copied without waiting (``non_blocking``),
keeps the GPU from idling between steps. On a CPU the collation is a tiny share of a step, and a worker
thread would only compete with the step's own threads, so batches are collated when asked.

The cursor runs ahead of the steps, so each fed batch carries the data position *after* it: that, not
the cursor's, is what a checkpoint saves, and a resumed run reads the same batches.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

from ..data.batches import BatchCursor

Tensors = tuple[torch.Tensor, ...]


@dataclass(frozen=True)
class Fed:
    """One batch: its pair indices, its tensors on the device and the data position after it."""

    indices: np.ndarray
    tensors: Tensors
    epoch: int
    index: int  # into this process's share of ``epoch``'s batches


class BatchFeed:
    """``cursor``'s batches through ``collate`` (indices -> host tensors), then ``to_device``. With
    ``ahead`` > 0 a worker thread collates (and pins, via ``pin``) up to that many batches in advance."""

    def __init__(self, cursor: BatchCursor, collate: Callable[[np.ndarray], Tensors], *,
                 to_device: Callable[[torch.Tensor], torch.Tensor], pin: Callable[[torch.Tensor], torch.Tensor],
                 ahead: int = 0) -> None:
        self.cursor, self.collate, self.to_device, self.pin, self.ahead = cursor, collate, to_device, pin, ahead
        self._pending: deque[tuple[np.ndarray, Future[Tensors], int, int]] = deque()
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="tbuild-feed") if ahead > 0 else None

    def _host(self, indices: np.ndarray) -> Tensors:
        return tuple(self.pin(t) for t in self.collate(indices))

    def _draw(self) -> tuple[np.ndarray, int, int]:
        indices = self.cursor.next()
        return indices, self.cursor.epoch, self.cursor.index

    def next(self) -> Fed:
        """The next batch (waiting for its collation if the worker is behind)."""
        if self._worker is None:
            indices, epoch, index = self._draw()
            return Fed(indices, tuple(self.to_device(t) for t in self.collate(indices)), epoch, index)
        while len(self._pending) < self.ahead + 1:
            indices, epoch, index = self._draw()
            self._pending.append((indices, self._worker.submit(self._host, indices), epoch, index))
        indices, future, epoch, index = self._pending.popleft()
        return Fed(indices, tuple(self.to_device(t) for t in future.result()), epoch, index)

    def close(self) -> None:
        """Stop the worker; batches collated ahead and not taken are dropped (the position saved is the
        taken one's)."""
        if self._worker is not None:
            self._worker.shutdown(wait=True, cancel_futures=True)
            self._pending.clear()

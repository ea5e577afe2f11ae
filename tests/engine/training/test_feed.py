"""The batch feed: batches collated ahead on a worker thread are the cursor's, in order, each with the
data position after it, across epoch boundaries; a failing collation is raised in the step that needs it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tbuild.engine.data.batches import BatchCursor
from tbuild.engine.training.feed import BatchFeed


def _cursor() -> BatchCursor:
    rng = np.random.default_rng(0)
    src, tgt = rng.integers(1, 20, 50), rng.integers(1, 20, 50)
    return BatchCursor(src, tgt, 60, seed=3)


def _collate(rows: np.ndarray) -> tuple[torch.Tensor, ...]:
    return (torch.as_tensor(rows, dtype=torch.long), torch.full((len(rows),), len(rows)))


@pytest.mark.parametrize("ahead", [1, 2, 5])
def test_ahead_feeds_the_cursors_batches_with_their_positions(ahead: int) -> None:
    plain = _cursor()
    expected = []
    for _ in range(3 * len(plain.batches) + 2):  # three epochs and a bit
        rows = plain.next()
        expected.append((rows.tolist(), plain.epoch, plain.index))
    feed = BatchFeed(_cursor(), _collate, to_device=lambda t: t, pin=lambda t: t, ahead=ahead)
    got = []
    for _ in expected:
        fed = feed.next()
        assert fed.tensors[0].tolist() == fed.indices.tolist()
        got.append((fed.indices.tolist(), fed.epoch, fed.index))
    feed.close()
    assert got == expected
    assert any(e > 0 and i == 0 for _, e, i in got)  # an epoch boundary was crossed


def test_a_failing_collation_is_raised_by_next() -> None:
    def broken(rows: np.ndarray) -> tuple[torch.Tensor, ...]:
        raise ValueError("bad batch")

    feed = BatchFeed(_cursor(), broken, to_device=lambda t: t, pin=lambda t: t, ahead=2)
    with pytest.raises(ValueError, match="bad batch"):
        feed.next()
    feed.close()

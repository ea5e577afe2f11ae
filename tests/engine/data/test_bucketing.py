"""Bounded batch shapes: lengths padded to a multiple, row counts rounded to geometric steps."""

from __future__ import annotations

import numpy as np
import pytest

from tbuild.components.specs.special import BOS, DEFAULT, EOS, PAD
from tbuild.engine.data.batches import IGNORED, Bucketing, batch_shapes, collate, token_batches
from tbuild.engine.data.pairs import Pairs


def test_lengths_round_up_to_the_multiple_within_the_position_limit() -> None:
    b = Bucketing(pad_multiple=8, max_len=20)
    assert [b.length(n) for n in (1, 8, 9, 16, 17, 20)] == [8, 8, 16, 16, 20, 20]
    assert b.length(21) == 24  # already past the limit: the model refuses it either way
    assert Bucketing().length(13) == 13


@pytest.mark.parametrize("steps", [1, 2, 4, 8])
def test_rows_take_steps_sizes_per_doubling_and_add_at_most_one_step(steps: int) -> None:
    b = Bucketing(row_steps=steps)
    sizes = [b.rows(n) for n in range(1, 4097)]
    assert all(n <= r <= n * (1 + 1 / steps) for n, r in enumerate(sizes, 1))
    assert sizes == sorted(sizes)  # monotone: a larger batch never gets fewer rows
    for octave in range(int(np.log2(steps)), 12):
        inside = {r for r in sizes if 2**octave < r <= 2 ** (octave + 1)}
        assert len(inside) == steps
    assert Bucketing(row_steps=0).rows(37) == 37


def test_bad_bucketing() -> None:
    with pytest.raises(ValueError, match="power of two"):
        Bucketing(row_steps=6)
    with pytest.raises(ValueError, match="pad_multiple"):
        Bucketing(pad_multiple=0)


def test_padded_collate_keeps_the_batch_and_adds_empty_rows() -> None:
    pairs = Pairs(src=[[5, 6, EOS]] * 10 + [[7, EOS]], tgt=[[12, EOS]] * 10 + [[13, 14, 15, EOS]])
    rows = list(range(11))
    exact = collate(pairs, rows, DEFAULT)
    src, tgt_in, tgt_out, src_pad = collate(pairs, rows, DEFAULT, bucketing=Bucketing(pad_multiple=8, row_steps=4))
    assert src.shape == src_pad.shape == (12, 8) and tgt_in.shape == tgt_out.shape == (12, 8)
    for padded, plain, fill in zip((src, tgt_in, tgt_out, src_pad), exact, (PAD, PAD, IGNORED, True), strict=True):
        assert padded[:11, :plain.size(1)].equal(plain)
        assert (padded[:11, plain.size(1):] == fill).all()
    assert src_pad[11:].tolist() == [[False] + [True] * 7]  # an empty row still has a key to attend to
    assert tgt_in[11:].tolist() == [[BOS] + [PAD] * 7]
    assert (tgt_out[11:] == IGNORED).all()  # and no target token: no loss


def test_bucketing_bounds_the_shapes_of_a_wmt_like_epoch() -> None:
    rng = np.random.default_rng(0)
    src = np.clip(np.round(rng.lognormal(3.1, 0.6, 60_000)), 2, 128).astype(int)
    tgt = np.clip(np.round(src * rng.normal(1.05, 0.15, len(src))), 2, 128).astype(int)
    batches = token_batches(src, tgt, 25_000, seed=1, epoch=0)
    exact = batch_shapes(src, tgt, batches)
    bounded = batch_shapes(src, tgt, batches, Bucketing(pad_multiple=8, row_steps=8))
    assert len(bounded) * 1.5 < len(exact)
    assert all(b % 8 == 0 or b <= 8 for b, _, _ in bounded)
    assert all(s % 8 == 0 and t % 8 == 0 for _, s, t in bounded)

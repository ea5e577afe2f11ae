"""Token-budget batching and collation."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from tbuild.components.specs.special import BOS, DEFAULT, EOS, PAD, Specials
from tbuild.engine.data.batches import IGNORED, collate, token_batches
from tbuild.engine.data.pairs import Pairs

rng = random.Random(0)
SRC = [rng.randint(2, 40) for _ in range(600)]
TGT = [rng.randint(2, 40) for _ in range(600)]


def padded(batch: list[int], lens: list[int]) -> int:
    return max(lens[i] for i in batch) * len(batch)


def batches_of(*args: object, **kwargs: object) -> list[list[int]]:
    return [b.tolist() for b in token_batches(*args, **kwargs)]  # type: ignore[arg-type]


def reference_batches(src: list[int], tgt: list[int], budget: int, seed: int, epoch: int) -> list[list[int]]:
    """The definition: sort by (target, source, seeded noise), grow each batch while count · longest
    fits the budget on both sides, shuffle the batches (the list-based implementation this replaced)."""
    rng = random.Random(f"tbuild-batches:{seed}:{epoch}")
    noise = [rng.random() for _ in src]
    order = sorted(range(len(src)), key=lambda i: (tgt[i], src[i], noise[i]))
    batches: list[list[int]] = []
    for i in order:
        batch = batches[-1] if batches else []
        grown = batch + [i]
        if batch and max(padded(grown, src), padded(grown, tgt)) <= budget:
            batch.append(i)
        else:
            batches.append([i])
    rng.shuffle(batches)
    return batches


@pytest.mark.parametrize("budget", [40, 300, 5000])
def test_same_batches_as_the_definition(budget: int) -> None:
    for epoch in range(3):
        assert batches_of(SRC, TGT, budget, seed=4, epoch=epoch) == reference_batches(SRC, TGT, budget, 4, epoch)
    np_lengths = batches_of(np.array(SRC, dtype=np.uint16), np.array(TGT, dtype=np.uint32), budget, seed=4, epoch=0)
    assert np_lengths == reference_batches(SRC, TGT, budget, 4, 0)


@pytest.mark.parametrize("budget", [40, 200, 1000])
def test_budget_on_both_sides_and_each_pair_once(budget: int) -> None:
    for epoch in range(3):
        batches = batches_of(SRC, TGT, budget, seed=1, epoch=epoch)
        assert sorted(i for b in batches for i in b) == list(range(len(SRC)))
        assert all(padded(b, SRC) <= budget and padded(b, TGT) <= budget for b in batches)
        assert all(len(b) > 0 for b in batches)


def test_batches_are_full_enough() -> None:
    batches = batches_of(SRC, TGT, 1000, seed=1, epoch=0)
    assert len(batches) < 600 * 40 / 1000 * 2  # sorted by length: little padding, few batches


def test_over_long_pair_is_alone() -> None:
    src, tgt = [3, 50, 3, 3], [3, 3, 3, 70]
    batches = batches_of(src, tgt, 20, seed=0, epoch=0)
    assert sorted(map(sorted, batches)) == [[0, 2], [1], [3]]


def test_deterministic_per_seed_and_epoch() -> None:
    first = batches_of(SRC, TGT, 300, seed=7, epoch=2)
    assert first == batches_of(SRC, TGT, 300, seed=7, epoch=2)
    assert first != batches_of(SRC, TGT, 300, seed=7, epoch=3)
    assert first != batches_of(SRC, TGT, 300, seed=8, epoch=2)
    state = random.getstate()
    batches_of(SRC, TGT, 300, seed=7, epoch=4)
    assert random.getstate() == state  # no global RNG use


def test_epochs_change_membership_not_only_order() -> None:
    a = {tuple(sorted(b)) for b in batches_of(SRC, TGT, 300, seed=1, epoch=0)}
    b = {tuple(sorted(b)) for b in batches_of(SRC, TGT, 300, seed=1, epoch=1)}
    assert a != b


def test_without_shuffle_batches_are_sorted_by_length() -> None:
    batches = batches_of(SRC, TGT, 300, seed=1, epoch=0, shuffle=False)
    assert batches == batches_of(SRC, TGT, 300, seed=5, epoch=9, shuffle=False)
    flat = [i for b in batches for i in b]
    assert flat == sorted(range(len(SRC)), key=lambda i: (TGT[i], SRC[i], i))


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="src_lens has 2 entries but tgt_lens has 1"):
        batches_of([1, 2], [1], 10, seed=0, epoch=0)
    with pytest.raises(ValueError, match="batch_tokens must be positive"):
        batches_of([1], [1], 0, seed=0, epoch=0)
    assert batches_of([], [], 10, seed=0, epoch=0) == []


def test_collate_shapes_and_contents() -> None:
    pairs = Pairs(src=[[5, 6, EOS], [7, EOS], [8, 9, 10, 11, EOS]], tgt=[[12, EOS], [13, 14, 15, EOS], [EOS]])
    src, tgt_in, tgt_out, src_pad = collate(pairs, [1, 0], DEFAULT)
    assert src.dtype == tgt_in.dtype == tgt_out.dtype == torch.long and src_pad.dtype == torch.bool
    assert src.tolist() == [[7, EOS, PAD], [5, 6, EOS]]
    assert src_pad.tolist() == [[False, False, True], [False, False, False]]  # from the rows' lengths
    assert tgt_in.tolist() == [[BOS, 13, 14, 15], [BOS, 12, PAD, PAD]]
    assert tgt_out.tolist() == [[13, 14, 15, EOS], [12, EOS, IGNORED, IGNORED]]
    src, tgt_in, tgt_out, src_pad = collate(pairs, [2], DEFAULT)
    assert src.shape == (1, 5) and tgt_in.tolist() == [[BOS]] and tgt_out.tolist() == [[EOS]]
    # a vocabulary without a pad: the start and fill are its own, the padding still told by the lengths
    gpt2 = Specials(pad=None, unk=9, bos=9, eos=9)
    src, tgt_in, tgt_out, src_pad = collate(Pairs([[5, 6, 9], [7, 9]], [[12, 9], [9]]), [0, 1], gpt2)
    assert src.tolist() == [[5, 6, 9], [7, 9, 9]] and src_pad.tolist() == [[False] * 3, [False, False, True]]
    assert tgt_in.tolist() == [[9, 12], [9, 9]] and tgt_out.tolist() == [[12, 9], [9, IGNORED]]


def test_cursor_shards_are_disjoint_equal_and_resume_exactly() -> None:
    from tbuild.engine.data.batches import BatchCursor

    src = [random.Random(i).randint(1, 30) for i in range(500)]
    tgt = [random.Random(-i).randint(1, 30) for i in range(500)]
    epoch = batches_of(src, tgt, 200, seed=3, epoch=0)
    whole = BatchCursor(src, tgt, 200, seed=3)
    assert [whole.next().tolist() for _ in range(len(epoch))] == epoch and whole.epoch == 1 and whole.index == 0
    shards = [BatchCursor(src, tgt, 200, seed=3, shard=(rank, 2)) for rank in range(2)]
    taken = [[c.next().tolist() for _ in range(len(epoch) // 2)] for c in shards]
    assert all(c.epoch == 1 for c in shards)  # each shard's epoch has len(epoch) // 2 batches
    flat = [tuple(b) for part in taken for b in part]
    assert len(set(flat)) == len(flat) and set(flat) <= {tuple(b) for b in epoch}
    resumed = BatchCursor(src, tgt, 200, seed=3, epoch=0, index=5, shard=(1, 2))
    assert resumed.next().tolist() == taken[1][5]
    with pytest.raises(ValueError, match="shard rank 2 is not in 0..1"):
        BatchCursor(src, tgt, 200, seed=3, shard=(2, 2))


def test_lengths_past_16_bits_sort_the_same() -> None:
    src, tgt = [70_000, 3, 3, 70_000], [5, 70_001, 5, 5]
    assert batches_of(src, tgt, 10**6, seed=2, epoch=0) == reference_batches(src, tgt, 10**6, 2, 0)


def test_cursor_keeps_whole_updates_so_any_shard_count_sees_one_sequence() -> None:
    """With 4 batches per update, 1, 2 or 4 shards together take the same batches in the same updates,
    and an epoch ends with its last whole update (no update straddles two epochs)."""
    from tbuild.engine.data.batches import BatchCursor

    src = [random.Random(i).randint(1, 30) for i in range(500)]
    tgt = [random.Random(-i).randint(1, 30) for i in range(500)]
    epoch = batches_of(src, tgt, 200, seed=3, epoch=0)
    assert len(epoch) % 4, "the test needs an epoch that is not a whole number of updates"
    whole_updates = len(epoch) // 4
    for world in (1, 2, 4):
        shards = [BatchCursor(src, tgt, 200, seed=3, shard=(r, world), per_update=4) for r in range(world)]
        for update in range(whole_updates):
            taken = [c.next().tolist() for _ in range(4 // world) for c in shards]
            assert sorted(taken) == sorted(epoch[4 * update:4 * update + 4])
        assert all(c.epoch == 1 and c.index == 0 for c in shards)
    with pytest.raises(ValueError, match="per_update \\(3\\) is not a multiple of world \\(2\\)"):
        BatchCursor(src, tgt, 200, seed=3, shard=(0, 2), per_update=3)

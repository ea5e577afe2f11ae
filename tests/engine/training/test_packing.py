"""Packed rows (train.packing): segment positions and masks against their definition; a packed batch gives
the loss and gradients of the same pairs padded one to a row (1e-5), for every positional scheme and
attention that can be packed; the packer puts every pair in exactly one row of fixed shape, from (seed,
epoch) alone; training on packed rows resumes exactly and compiles one graph; refusals name the field."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
import torch._dynamo

from tbuild.builder import SpecError, load_spec
from tbuild.components.packing import blocked, segment_positions
from tbuild.components.specs.special import BOS, DEFAULT, EOS, PAD
from tbuild.engine.data.batches import IGNORED, collate
from tbuild.engine.data.packing import collate_packed, pack_length, packed_batches
from tbuild.engine.data.pairs import Pairs
from tbuild.engine.loss import label_smoothed_nll
from tbuild.engine.run.directory import RunDir, read_jsonl
from tbuild.engine.training.compiled import compile_model, graphs
from tbuild.engine.training.run import train_spec
from tests.conftest import TINY, tiny_model, tiny_train_spec


def random_pairs(n: int, seed: int = 0, longest: int = 11) -> Pairs:
    rng = random.Random(seed)

    def row() -> list[int]:
        return [rng.randint(4, 39) for _ in range(rng.randint(0, longest - 1))] + [EOS]

    return Pairs(src=[row() for _ in range(n)], tgt=[row() for _ in range(n)])


def test_segment_positions_and_masks_by_hand() -> None:
    seg = torch.tensor([[1, 1, 1, 2, 2, 3, 0, 0]])
    assert segment_positions(seg).tolist() == [[0, 1, 2, 0, 1, 0, 0, 1]]
    mask = blocked(seg, torch.tensor([[1, 2, 2, 0]]))[0, 0]  # (T, S): True = may not see
    assert mask[0].tolist() == [False, True, True, True]  # segment 1 sees its own key only
    assert mask[3].tolist() == [True, False, False, True]
    assert mask[5].tolist() == [True, True, True, True]  # segment 3 has no key here
    assert mask[6].tolist() == [False] * 4  # a padding query sees every key: no empty softmax row


def test_collate_packed_lays_pairs_end_to_end() -> None:
    pairs = Pairs(src=[[5, 6, EOS], [7, EOS]], tgt=[[8, EOS], [9, 10, 11, EOS]])
    src, tgt_in, tgt_out, src_pad, src_seg, tgt_seg = collate_packed(pairs, np.array([[0, 0], [1, 0]]), 8, 2, DEFAULT)
    assert src[0].tolist() == [5, 6, EOS, 7, EOS, PAD, PAD, PAD] and src_seg[0].tolist() == [1, 1, 1, 2, 2, 0, 0, 0]
    assert src_pad[0].tolist() == [False] * 5 + [True] * 3
    assert tgt_out[0].tolist() == [8, EOS, 9, 10, 11, EOS, IGNORED, IGNORED]
    assert tgt_in[0].tolist() == [BOS, 8, BOS, 9, 10, 11, PAD, PAD]  # each pair shifted right, its EOS not fed
    assert tgt_seg[0].tolist() == [1, 1, 2, 2, 2, 2, 0, 0]
    assert src[1].eq(PAD).all() and tgt_seg[1].eq(0).all()  # a row the batch does not fill is empty


def _loss_and_grads(model: torch.nn.Module, tensors: tuple[torch.Tensor, ...]) -> tuple[float, dict]:
    src, tgt_in, tgt_out, *padding = tensors  # the source's padding mask, and packed rows' segment ids
    model.zero_grad(set_to_none=True)
    loss, _, n = label_smoothed_nll(model(src, tgt_in, *padding), tgt_out, 0.1)
    (loss / n).backward()
    grads = {k.removeprefix("_orig_mod."): p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}
    return (loss / n).item(), grads


@pytest.mark.parametrize("overrides", [[], ["model.norm_placement=pre"], ["model.positional.kind=learned",
                                       "model.max_positions=32"], ["model.positional.kind=rope"],
                                       ["model.positional.kind=alibi"], ["model.attention.kind=relative"]])
def test_packed_rows_give_the_unpacked_loss_and_gradients(overrides: list[str]) -> None:
    model = tiny_model(overrides)  # eval mode: no dropout, whose draws depend on the shape
    model.double()  # the same sums in another order: compare in float64
    pairs = random_pairs(24)
    batch = packed_batches(pairs.src_lengths, pairs.tgt_lengths, 24, rows=16, seed=0, epoch=0)[0]
    assert len(set(batch[:, 1].tolist())) < len(batch)  # rows hold several pairs
    loss, grads = _loss_and_grads(model, collate(pairs, batch[:, 0], DEFAULT))
    packed_loss, packed_grads = _loss_and_grads(model, collate_packed(pairs, batch, 24, 16, DEFAULT))
    assert packed_loss == pytest.approx(loss, abs=1e-5)
    assert packed_grads.keys() == grads.keys()
    for name, g in grads.items():
        torch.testing.assert_close(packed_grads[name], g, atol=1e-5, rtol=1e-5, msg=name)


def test_packer_places_every_pair_once_in_rows_of_fixed_length(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    src = rng.integers(1, 25, 500)
    tgt = np.clip(src + rng.integers(-3, 4, 500), 1, 27)  # a translation's length follows its source's
    length = pack_length(src, tgt)
    assert length % 8 == 0 and length >= max(src.max(), tgt.max())
    batches = packed_batches(src, tgt, length, rows=6, seed=1, epoch=0)
    placed = np.concatenate([b[:, 0] for b in batches])
    assert sorted(placed.tolist()) == list(range(500))
    for b in batches:
        assert b[:, 1].max() < 6
        for r in np.unique(b[:, 1]):
            members = b[b[:, 1] == r, 0]
            assert src[members].sum() <= length and tgt[members].sum() <= length
    fill = (src.sum() + tgt.sum()) / (2 * len(batches) * 6 * length)
    import tbuild.engine.data.packing as packing

    monkeypatch.setattr(packing, "OPEN_ROWS", 1)  # next fit: one open row
    next_fit = len(packed_batches(src, tgt, length, rows=6, seed=1, epoch=0))
    assert fill > 0.85 and len(batches) < next_fit  # first fit among open rows wastes little
    monkeypatch.undo()
    again = packed_batches(src, tgt, length, rows=6, seed=1, epoch=0)
    assert all(np.array_equal(a, b) for a, b in zip(batches, again, strict=True))
    other = packed_batches(src, tgt, length, rows=6, seed=1, epoch=1)
    assert not all(np.array_equal(a, b) for a, b in zip(batches, other, strict=False))
    with pytest.raises(ValueError, match="does not fit"):
        packed_batches(src, tgt, length - 8 if length > src.max() + 8 else 4, rows=6, seed=1, epoch=0)


def test_packed_rows_compile_to_one_graph() -> None:
    """Every packed batch has one shape: after the first, no graph is built; the compiled model's loss and
    gradients are the eager model's (1e-5)."""
    model = tiny_model()
    compiled = compile_model(model, backend="eager")
    pairs = random_pairs(200, seed=2)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    for i, batch in enumerate(packed_batches(pairs.src_lengths, pairs.tgt_lengths, 16, 8, seed=0, epoch=0)[:6]):
        tensors = collate_packed(pairs, batch, 16, 8, DEFAULT)
        eager, eager_grads = _loss_and_grads(model, tensors)
        loss, grads = _loss_and_grads(compiled, tensors)
        assert loss == pytest.approx(eager, abs=1e-5)
        for name, g in eager_grads.items():
            torch.testing.assert_close(grads[name], g, atol=1e-5, rtol=1e-5, msg=name)
        if i == 0:
            first = graphs()
    assert graphs() == first == 1
    torch._dynamo.reset()


def test_packed_training_resumes_exactly(tiny_corpus: Path, tmp_path: Path) -> None:
    events: list = []

    def train(run: Path, steps: int) -> None:
        spec = tiny_train_spec(tiny_corpus, run, max_steps=steps, checkpoint_every=3, packing=True)
        train_spec(load_spec(spec), lambda kind, data: events.append((kind, data)))

    train(tmp_path / "straight", 6)
    train(tmp_path / "split", 3)
    train(tmp_path / "split", 6)
    a, b = read_jsonl(tmp_path / "straight" / "metrics.jsonl"), read_jsonl(tmp_path / "split" / "metrics.jsonl")
    assert [r["step"] for r in a] == [r["step"] for r in b] == list(range(1, 7))
    for ra, rb in zip(a, b, strict=True):
        assert abs(ra["loss"] - rb["loss"]) <= 1e-6
    assert RunDir(tmp_path / "split").step_checkpoints()
    said = " ".join(d.get("message", "") for k, d in events if k == "info")
    assert "packed rows:" in said and "% of them real" in said


def test_packing_is_refused_for_other_graphs_naming_the_field(tmp_path: Path) -> None:
    spec = {**TINY, "model": {**TINY["model"], "kind": "decoder_only", "encoder": None},
            "train": {"packing": True}}
    with pytest.raises(SpecError, match=r"train\.packing"):
        load_spec(spec)

"""A decoder-only translator (model.prefix_lm): the sequence layout (BOS, source, EOS as the separator,
target), the prefix mask by hand, padding in batches of different source lengths, which logits the
forward gives back for loss target and both, and the prefix run once then cached steps equal to the full
pass."""

from __future__ import annotations

import copy

import pytest
import torch

from tbuild.components.decoder_only import DecoderOnly, pack, prefix_mask
from tbuild.components.specs.special import BOS, EOS, PAD
from tbuild.components.transformer import DecoderCache, padding_mask

from ..conftest import TINY, tiny_model

PLM = copy.deepcopy(TINY)
PLM["model"].pop("encoder")
PLM["model"]["kind"] = "decoder_only"
PLM["model"]["prefix_lm"] = {"attention": "prefix", "loss": "target"}


def plm(overrides: list[str] | None = None) -> DecoderOnly:
    model = tiny_model(overrides, spec=PLM)
    assert isinstance(model, DecoderOnly) and model.prefix_lm is not None
    return model


def test_the_prefix_mask_by_hand() -> None:
    """Prefix length 3 of 5 positions: positions 0-2 see 0-2 (the whole prefix, nothing after it); 3 sees
    0-3, 4 sees 0-4 (the prefix and the earlier targets)."""
    blocked = prefix_mask(torch.tensor([3, 1]), 5)
    assert blocked.shape == (2, 1, 5, 5)
    sees = (~blocked[0, 0]).int().tolist()
    assert sees == [[1, 1, 1, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]
    assert (~blocked[1, 0]).int().tolist() == torch.tril(torch.ones(5, 5, dtype=torch.int)).tolist()  # causal


def test_pack_lays_out_bos_source_separator_target() -> None:
    src = torch.tensor([[5, 6, EOS], [7, EOS, PAD]])  # sources end with EOS, the separator
    tgt_in = torch.tensor([[BOS, 8, 9], [BOS, 10, PAD]])
    seq, prefix = pack(src, torch.tensor([3, 2]), tgt_in, BOS, PAD)
    assert seq.tolist() == [[BOS, 5, 6, EOS, 8, 9], [BOS, 7, EOS, 10, PAD, PAD]]
    assert prefix.tolist() == [4, 3]


@pytest.mark.parametrize("attention", ["prefix", "causal"])
def test_loss_target_gives_the_target_positions_logits(attention: str) -> None:
    """forward(src, BOS+target) = the joined sequence's logits from the separator on, row by row (each row
    alone, so padding in a batch of different source lengths changes nothing)."""
    model = plm([f"model.prefix_lm.attention={attention}"])
    src = torch.tensor([[5, 6, 7, EOS], [8, EOS, PAD, PAD]])
    tgt_in = torch.tensor([[BOS, 11, 12], [BOS, 13, 14]])
    batch = model(src, tgt_in, padding_mask(torch.tensor([4, 2]), 4))  # (2, 3, V)
    for row, (n_src, seq) in enumerate([(4, [BOS, 5, 6, 7, EOS, 11, 12]), (2, [BOS, 8, EOS, 13, 14])]):
        ids = torch.tensor([seq])
        alone = model.decode(ids, prefix=torch.tensor([n_src + 1]))
        assert torch.allclose(batch[row], alone[0, n_src:], atol=1e-5)


def test_prefix_attention_is_bidirectional_over_the_source_only() -> None:
    """A later source token changes an earlier source position's states (prefix attention) but never a
    target position's earlier than the change; a target token changes no source position."""
    model = plm()
    seq, prefix = torch.tensor([[BOS, 5, 6, 7, EOS, 11, 12, 13]]), torch.tensor([5])
    full = model.decode(seq, prefix=prefix)
    changed = seq.clone()
    changed[0, 3] = 9  # a later source token
    assert (model.decode(changed, prefix=prefix)[0, 1] - full[0, 1]).abs().max() > 1e-4
    changed = seq.clone()
    changed[0, 6] = 20  # a target token
    after = model.decode(changed, prefix=prefix)
    assert (after[0, :6] - full[0, :6]).abs().max() <= 1e-5
    causal = plm(["model.prefix_lm.attention=causal"])
    full = causal.decode(seq, prefix=prefix)
    changed = seq.clone()
    changed[0, 3] = 9
    assert (causal.decode(changed, prefix=prefix)[0, :3] - full[0, :3]).abs().max() <= 1e-5


def test_loss_both_gives_every_position() -> None:
    model = plm(["model.prefix_lm.loss=both"])
    src = torch.tensor([[5, 6, EOS], [8, EOS, PAD]])
    joined_in = torch.tensor([[BOS, 5, 6, EOS, 11], [BOS, 8, EOS, 13, PAD]])
    logits = model(src, joined_in, padding_mask(torch.tensor([3, 2]), 3))
    assert logits.shape == (2, 5, 40)
    alone = model.decode(joined_in[1:, :4], prefix=torch.tensor([3]))
    assert torch.allclose(logits[1, :4], alone[0], atol=1e-5)


@pytest.mark.parametrize("overrides", [[], ["model.prefix_lm.attention=causal"], ["model.positional.kind=rope"],
                                       ["model.attention.kind=relative"], ["model.positional.kind=alibi"]])
def test_prefix_once_then_cached_steps_equal_the_full_pass(overrides: list[str]) -> None:
    model = plm(overrides)
    seq, prefix = torch.tensor([[BOS, 5, 6, 7, EOS, 11, 12, 13], [BOS, 9, 8, 7, EOS, 14, 15, 16]]), 5
    full = model.decode(seq, prefix=torch.tensor([prefix, prefix]))
    cache = DecoderCache()
    first = model.decode(seq[:, :prefix], cache)  # the prefix whole, once
    steps = [first[:, -1:]] + [model.decode(seq[:, t:t + 1], cache) for t in range(prefix, seq.size(1))]
    assert torch.allclose(torch.cat(steps, 1), full[:, prefix - 1:], atol=1e-5)

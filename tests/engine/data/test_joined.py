"""A prefix LM's batches (engine/data/joined.py): loss target keeps the pairs as they are (the model
packs them, the labels are the target and its EOS); loss both joins each source to its target, so the
input is BOS, source, separator, target and the labels are every next token."""

from __future__ import annotations

import numpy as np

from tbuild.builder import load_spec
from tbuild.components.specs.special import BOS, DEFAULT, EOS, PAD
from tbuild.engine.data.batches import IGNORED, collate
from tbuild.engine.data.joined import JoinedPairs, for_model
from tbuild.engine.data.pairs import Pairs

PAIRS = Pairs([[5, 6, EOS], [7, EOS]], [[8, 9, EOS], [10, EOS]])


def spec(loss: str):  # noqa: ANN201
    return load_spec({"model": {"kind": "decoder_only", "prefix_lm": {"loss": loss}, "d_model": 16,
                                "decoder": {"layers": 1, "heads": 2, "d_ff": 32}},
                      "data": {"dataset": "multi30k"}}).spec


def test_loss_target_labels_the_target_and_its_eos_only() -> None:
    pairs = for_model(spec("target"), PAIRS)
    assert pairs is PAIRS
    src, tgt_in, tgt_out, _ = collate(pairs, np.array([0, 1]), DEFAULT)
    assert src.tolist() == [[5, 6, EOS], [7, EOS, PAD]]
    assert tgt_in.tolist() == [[BOS, 8, 9], [BOS, 10, PAD]]
    assert tgt_out.tolist() == [[8, 9, EOS], [10, EOS, IGNORED]]


def test_loss_both_labels_the_source_the_separator_and_the_target() -> None:
    pairs = for_model(spec("both"), PAIRS)
    assert isinstance(pairs, JoinedPairs)
    assert pairs.tgt_lengths.tolist() == [6, 4]
    src, tgt_in, tgt_out, src_pad = collate(pairs, np.array([0, 1]), DEFAULT)
    assert src.tolist() == [[5, 6, EOS], [7, EOS, PAD]]
    assert src_pad.tolist() == [[False] * 3, [False, False, True]]  # the model reads each row's prefix length
    assert tgt_in.tolist() == [[BOS, 5, 6, EOS, 8, 9], [BOS, 7, EOS, 10, PAD, PAD]]
    assert tgt_out.tolist() == [[5, 6, EOS, 8, 9, EOS], [7, EOS, 10, EOS, IGNORED, IGNORED]]

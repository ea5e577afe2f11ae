"""model.char_input (components/char_input.py): the spelling table, shapes, gradients reaching the character
table, off by default (no module, no tensor, the architecture hash unchanged), refused without an encoder.
Through the CLI: tests/cli/test_char_input.py."""

from __future__ import annotations

import copy

import pytest
import torch

from tbuild.builder import build_model, load_spec
from tbuild.builder.loader import SpecError
from tbuild.components.char_input import CharCNN
from tests.conftest import REPO

TAGGER = {"model": {"kind": "encoder_only", "vocab_size": 12, "d_model": 16,
                    "encoder": {"layers": 1, "heads": 2, "d_ff": 32},
                    "head": {"kind": "token_classification", "labels": ["A", "B"]}},
          "data": {"dataset": {"kind": "tagging", "source": "files"}}}


def with_chars(spec: dict, **fields: object) -> dict:
    out = copy.deepcopy(spec)
    out["model"]["char_input"] = {"kind": "char_cnn", **fields}
    return out


def test_spell_writes_each_pieces_bytes_plus_one_and_cuts_long_pieces() -> None:
    block = build_model(load_spec(with_chars(TAGGER, max_chars=4)).spec).src_embed.chars
    table = block.spell([None, "ab", "▁Ünïcode", ""])
    assert table.shape == (4, 4) and table.dtype == torch.long
    assert table[0].tolist() == [0, 0, 0, 0] and table[3].tolist() == [0, 0, 0, 0]
    assert table[1].tolist() == [ord("a") + 1, ord("b") + 1, 0, 0]
    assert table[2].tolist() == [b + 1 for b in "▁Ü".encode()[:4]]  # bytes, the first four


@pytest.mark.parametrize("combine", ["add", "concat"])
def test_shapes_and_gradients_reach_the_character_table(combine: str) -> None:
    net = build_model(load_spec(with_chars(TAGGER, combine=combine, filters=8, dim=6)).spec)
    chars = net.src_embed.chars
    assert isinstance(chars, CharCNN) and chars.spelling.shape == (12, 16)
    chars.spelling.copy_(chars.spell([None] * 4 + [f"w{i}" for i in range(8)]))
    ids = torch.tensor([[4, 5, 6, 2], [7, 3, 0, 0]])
    vectors = torch.randn(2, 4, 16)
    assert chars(ids, vectors).shape == (2, 4, 16)
    net(ids).sum().backward()
    grad = chars.chars.weight.grad
    assert grad is not None and grad[1:].abs().sum() > 0 and grad[0].abs().sum() == 0  # padding never learns
    assert chars.conv.weight.grad.abs().sum() > 0


def test_a_piece_without_characters_pools_to_zeros() -> None:
    net = build_model(load_spec(with_chars(TAGGER, combine="add")).spec)
    chars = net.src_embed.chars
    vectors = torch.zeros(1, 1, 16)
    out = chars(torch.tensor([[0]]), vectors)  # spelling all zeros: only the projection's bias is added
    assert torch.allclose(out, chars.project.bias.view(1, 1, -1))


def test_off_by_default_keeps_the_model_and_the_architecture_hash() -> None:
    plain = load_spec(TAGGER).spec
    assert plain.model.char_input is None
    assert not any("chars" in name for name in build_model(plain).state_dict())
    assert plain.architecture_hash() == load_spec(TAGGER, ["model.char_input=null"]).spec.architecture_hash()
    assert load_spec(with_chars(TAGGER)).spec.architecture_hash() != plain.architecture_hash()
    # the shipped recipes hash as before model.char_input existed
    assert load_spec(REPO / "specs" / "examples" / "graphs" / "pos-tagger.yaml").spec.architecture_hash() \
        == "7bd60a485cdc7d26"
    assert load_spec(REPO / "specs" / "multi30k.yaml").spec.architecture_hash() == "608199bb57aef3bd"
    # and a character input declared before char_input.pool existed hashes as it did
    assert load_spec(REPO / "specs" / "examples" / "graphs" / "pos-tagger-chars.yaml").spec.architecture_hash() \
        == "f474dd9eb316568e"


def test_an_encoder_decoder_takes_it_on_its_source_side_only() -> None:
    spec = {"model": {"vocab_size": 12, "d_model": 16, "encoder": {"layers": 1, "heads": 2, "d_ff": 32},
                      "decoder": {"layers": 1, "heads": 2, "d_ff": 32}, "char_input": {"kind": "char_cnn"}}}
    net = build_model(load_spec(spec).spec)
    assert isinstance(net.src_embed.chars, CharCNN) and net.tgt_embed.chars is None
    logits = net(torch.randint(4, 12, (2, 5)), torch.randint(4, 12, (2, 3)))
    assert logits.shape == (2, 3, 12)


def test_refused_without_an_encoder() -> None:
    spec = {"model": {"kind": "decoder_only", "vocab_size": 12, "d_model": 16,
                      "decoder": {"layers": 1, "heads": 2, "d_ff": 32}, "char_input": {"kind": "char_cnn"}}}
    with pytest.raises(SpecError, match="char_input feeds the encoder's input"):
        load_spec(spec)


def test_word_pooling_gives_every_piece_its_words_maximum() -> None:
    net = build_model(load_spec(with_chars(TAGGER, pool="word", filters=8)).spec)
    chars = net.src_embed.chars
    pieces = [None] * 4 + ["▁un", "like", "ly", "▁cat", "s", "▁a", "b", "c"]
    chars.spelling.copy_(chars.spell(pieces))
    ids = torch.tensor([[2, 4, 5, 6, 7, 8, 3, 0], [2, 9, 10, 7, 11, 3, 0, 0]])
    by_piece = build_model(load_spec(with_chars(TAGGER, pool="piece", filters=8)).spec).src_embed.chars
    by_piece.load_state_dict(chars.state_dict())
    by_piece.project = chars.project = torch.nn.Identity()  # combine add: zeros + the pooled vectors themselves
    zeros = torch.zeros(2, 8, 8)
    h, pooled = by_piece(ids, zeros), chars(ids, zeros)
    words = [[[0], [1, 2, 3], [4, 5], [6], [7]], [[0], [1, 2], [3, 4], [5], [6], [7]]]  # by hand, BOS/EOS/PAD alone
    for row, spans in enumerate(words):
        for span in spans:
            expected = h[row, span].amax(0)
            for t in span:
                assert torch.equal(pooled[row, t], expected)
    assert not torch.equal(pooled, h)  # a word of several pieces changed

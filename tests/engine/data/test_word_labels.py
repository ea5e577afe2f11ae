"""A tagger's data (engine/data/word_labels.py): each word's label at its first subword piece, or at its last
(model.head.piece: last) in the loss's label tensor, decoding and evaluation alike; the files' one-line
errors (line counts, tag counts, a tag outside the model's labels), and the baseline."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tbuild.builder import load_spec
from tbuild.components.specs.special import DEFAULT, EOS, PAD
from tbuild.engine.data.tokenizer import Tokenizer
from tbuild.engine.data.word_labels import encode_tagged, label_rows, read_tagged, word_pieces
from tbuild.engine.decoding.tagger import Baseline
from tbuild.engine.errors import DataError

TOY = {"train": ("cats dogs birds\nthe can rusts\nyou can can\n", "NNS NNS NNS\nDT NN VBZ\nPRP MD MD\n"),
       "test": ("the can swims cats\n", "DT NN VBZ NNS\n")}


def toy(tmp: Path, **over: tuple[str, str]) -> Path:
    for split, (words, tags) in (TOY | over).items():
        (tmp / f"{split}.words").write_text(words)
        (tmp / f"{split}.tags").write_text(tags)
    return tmp


def spec_of(tmp: Path, labels: list[str] | str = "from_data", piece: str = "first"):  # noqa: ANN201
    return load_spec({"model": {"kind": "encoder_only", "d_model": 16, "encoder": {"layers": 1, "heads": 2},
                                "head": {"kind": "token_classification", "labels": labels, "piece": piece}},
                      "data": {"dataset": {"kind": "tagging", "source": "files"}, "train": str(tmp / "train"),
                               "test": str(tmp / "test")}}).spec


def test_each_label_sits_at_its_words_first_piece() -> None:
    src, tgt = label_rows([[10], [11, 12, 13], [14]], [0, 2, 1], "first", DEFAULT)
    assert src == [10, 11, 12, 13, 14, EOS]
    assert tgt == [1, 3, PAD, PAD, 2, PAD]  # label + 1; no label (no loss) inside a word and at EOS
    src, tgt = label_rows([[10], [11, 12, 13], [14]], [0, 2, 1], "last", DEFAULT)
    assert src == [10, 11, 12, 13, 14, EOS]
    assert tgt == [1, PAD, PAD, 3, 2, PAD]  # model.head.piece: last


def test_a_word_split_into_pieces_keeps_its_pieces_of_the_whole_line(tmp_path: Path) -> None:
    from tbuild.builder.spec import TokenizerSpec

    lines = ["the cat sat on the mat", "a dog ran", "the dog sat"] * 5
    tok = Tokenizer.train(lines, TokenizerSpec(vocab_size=30), tmp_path / "spm")
    words = ["the", "unbelievable", "cat"]
    [pieces] = word_pieces(tok, [words])
    assert len(pieces[1]) > 1  # "unbelievable" is several pieces
    assert [i for word in pieces for i in word] == tok.encode([" ".join(words)])[0]
    src, tgt = label_rows(pieces, [0, 1, 2], "first", tok.special)
    starts = [p for p, t in enumerate(tgt) if t != PAD]
    assert starts == [0, len(pieces[0]), len(pieces[0]) + len(pieces[1])]
    assert [tgt[p] - 1 for p in starts] == [0, 1, 2] and len(src) == len(tgt)


def test_bad_files_are_one_line_errors_naming_file_and_line(tmp_path: Path) -> None:
    spec = spec_of(toy(tmp_path, test=("a b\nc d e\n", "X Y\nX Y\n")))
    with pytest.raises(DataError, match=rf"^data.test: {tmp_path}/test.tags line 2: 2 tags for the 3 words of "):
        read_tagged(spec.data, "test")
    toy(tmp_path, test=("a b\nc d\n", "X Y\n"))
    with pytest.raises(DataError, match="line counts differ: 2 lines in .*test.words but 1 lines in .*test.tags"):
        read_tagged(spec.data, "test")


def test_a_tag_outside_the_labels_is_refused_naming_file_and_line(tmp_path: Path) -> None:
    from tbuild.builder.spec import TokenizerSpec

    spec = spec_of(toy(tmp_path, test=("the can\nthe can\n", "DT NN\nDT XX\n")), ["DT", "NN"])
    tok = Tokenizer.train(TOY["train"][0].split("\n") * 3, TokenizerSpec(vocab_size=30), tmp_path / "spm")
    with pytest.raises(DataError, match=rf"{tmp_path}/test.tags line 2: tag 'XX' is not one of the model's 2 labels"):
        encode_tagged(spec, "test", tok, lambda _: None)


def test_the_baseline_by_hand(tmp_path: Path) -> None:
    spec = spec_of(toy(tmp_path))
    baseline = Baseline.of(read_tagged(spec.data, "train"))
    # can: NN once, MD twice; the most frequent tag overall: NNS (3)
    assert baseline.by_word["can"] == "MD" and baseline.overall == "NNS"
    # the→DT right, can→MD wrong, swims (unknown)→NNS wrong, cats→NNS right
    assert baseline.accuracy(read_tagged(spec.data, "test")) == 0.5


def unbelievable(tmp: Path) -> tuple[Tokenizer, list[list[int]]]:
    """A toy tokenizer that splits "unbelievable" into several pieces, and the test line's word pieces."""
    from tbuild.builder.spec import TokenizerSpec

    lines = ["the cat sat on the mat", "a dog ran", "the dog sat"] * 5
    tok = Tokenizer.train(lines, TokenizerSpec(vocab_size=30), tmp / "spm")
    [pieces] = word_pieces(tok, [["the", "unbelievable", "cat"]])
    first, last = pieces[1][0], pieces[1][-1]  # "▁" and "e" (the toy's vocabulary lacks most of its letters)
    assert len(pieces[1]) > 2 and first != last and not {first, last} & {*pieces[0], *pieces[2]}
    return tok, pieces


def test_with_piece_last_the_loss_labels_sit_at_each_words_last_piece(tmp_path: Path) -> None:
    from tbuild.engine.data.batches import collate

    tok, pieces = unbelievable(tmp_path)
    toy(tmp_path, test=("the unbelievable cat\n", "DT JJ NN\n"))
    a, k, c = map(len, pieces)  # the: 1 piece, unbelievable: k > 2, cat: 2 ("▁c", "at")
    first = [1] + [PAD] * (a - 1) + [2] + [PAD] * (k - 1) + [3] + [PAD] * (c - 1) + [PAD]  # DT, JJ, NN, EOS
    last = [PAD] * (a - 1) + [1] + [PAD] * (k - 1) + [2] + [PAD] * (c - 1) + [3] + [PAD]
    assert last[-3:] == [PAD, 3, PAD] and last[a + k - 2: a + k] == [PAD, 2]  # "at" holds NN, "…e" holds JJ
    for piece, expected in (("first", first), ("last", last)):
        pairs = encode_tagged(spec_of(tmp_path, ["DT", "JJ", "NN"], piece), "test", tok, lambda _: None)
        src, _, tgt_out, _ = collate(pairs, [0], tok.special)  # what the trainer's and validation's loss see
        assert src[0].tolist() == [i for word in pieces for i in word] + [EOS]
        assert tgt_out[0].tolist() == expected, piece
        assert pairs.tgt_lengths.tolist() == [3]  # the loss is normalised per word either way


class ByPiece(torch.nn.Module):
    """A stand-in tagger: each position's best label is ``table[its piece id]`` (any other call shape
    works: decoding calls model(src, None, pad), evaluation model(src, tgt_in, pad))."""

    def __init__(self, table: torch.Tensor, labels: int) -> None:
        super().__init__()
        self.table, self.labels = table, labels

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor | None = None,
                src_pad: torch.Tensor | None = None) -> torch.Tensor:
        return torch.nn.functional.one_hot(self.table[src], self.labels).float() * 10


def test_decode_and_evaluate_read_each_word_at_the_same_piece(tmp_path: Path) -> None:
    from tbuild.engine.decoding.native import NativeEngine
    from tbuild.engine.decoding.tagger import evaluate_tagger, tag_lines
    from tbuild.engine.device.policy import Policy
    from tbuild.engine.run.directory import Run, RunDir

    tok, pieces = unbelievable(tmp_path)
    toy(tmp_path, train=("the unbelievable cat\n", "DT JJ NN\n"), test=("the unbelievable cat\n", "DT JJ NN\n"))
    labels = ["DT", "JJ", "NN", "VB"]
    table = torch.full((tok.vocab_size,), 3)  # VB (wrong) everywhere but at the pieces of "the" and "cat",
    table[pieces[0]], table[pieces[2]], table[pieces[1][-1]] = 0, 2, 1  # and at unbelievable's last
    t = NativeEngine(ByPiece(table, len(labels)), tok, Policy(torch.device("cpu")), "toy", 64, None)
    for piece, tags, accuracy in (("first", ["DT", "VB", "NN"], 2 / 3), ("last", ["DT", "JJ", "NN"], 1.0)):
        spec = spec_of(tmp_path, labels, piece)
        assert tag_lines(t, spec, ["the unbelievable cat", ""]) == [tags, []]
        record = evaluate_tagger(Run(spec, RunDir(tmp_path / "run")), t, "test")
        assert record.accuracy == pytest.approx(accuracy), piece  # what decode's tags score against DT JJ NN

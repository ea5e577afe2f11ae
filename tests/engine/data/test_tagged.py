"""A tagger's data (engine/data/tagged.py): each word's label at its first subword piece, the files'
one-line errors (line counts, tag counts, a tag outside the model's labels), and the baseline."""

from __future__ import annotations

from pathlib import Path

import pytest

from tbuild.builder import load_spec
from tbuild.builder.tokens import EOS, PAD
from tbuild.engine.data.tagged import encode_tagged, first_piece_rows, read_tagged, word_pieces
from tbuild.engine.data.tokenizer import Tokenizer
from tbuild.engine.decoding.tagger import Baseline
from tbuild.engine.errors import DataError

TOY = {"train": ("cats dogs birds\nthe can rusts\nyou can can\n", "NNS NNS NNS\nDT NN VBZ\nPRP MD MD\n"),
       "test": ("the can swims cats\n", "DT NN VBZ NNS\n")}


def toy(tmp: Path, **over: tuple[str, str]) -> Path:
    for split, (words, tags) in (TOY | over).items():
        (tmp / f"{split}.words").write_text(words)
        (tmp / f"{split}.tags").write_text(tags)
    return tmp


def spec_of(tmp: Path, labels: list[str] | str = "from_data"):  # noqa: ANN201
    return load_spec({"model": {"kind": "encoder_only", "d_model": 16, "encoder": {"layers": 1, "heads": 2},
                                "head": {"kind": "token_classification", "labels": labels}},
                      "data": {"dataset": {"kind": "tagging", "source": "files"}, "train": str(tmp / "train"),
                               "test": str(tmp / "test")}}).spec


def test_each_label_sits_at_its_words_first_piece() -> None:
    src, tgt = first_piece_rows([[10], [11, 12, 13], [14]], [0, 2, 1])
    assert src == [10, 11, 12, 13, 14, EOS]
    assert tgt == [1, 3, PAD, PAD, 2, PAD]  # label + 1; no label (no loss) inside a word and at EOS


def test_a_word_split_into_pieces_keeps_its_pieces_of_the_whole_line(tmp_path: Path) -> None:
    from tbuild.builder.schema import TokenizerSpec

    lines = ["the cat sat on the mat", "a dog ran", "the dog sat"] * 5
    tok = Tokenizer.train(lines, TokenizerSpec(vocab_size=30), tmp_path / "spm")
    words = ["the", "unbelievable", "cat"]
    [pieces] = word_pieces(tok, [words])
    assert len(pieces[1]) > 1  # "unbelievable" is several pieces
    assert [i for word in pieces for i in word] == tok.encode([" ".join(words)])[0]
    src, tgt = first_piece_rows(pieces, [0, 1, 2])
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
    from tbuild.builder.schema import TokenizerSpec

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

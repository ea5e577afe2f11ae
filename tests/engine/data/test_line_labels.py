"""A sequence classifier's data (engine/data/line_labels.py, engine/data/classification.py): the
LABEL<TAB>TEXT format (plain or .gz) and its one-line errors naming the file and line, the label set fitted
from the training split, the rows (BOS, pieces, EOS; cut to the model's positions), the language-ID
split written from Multi30k's three sides, and the evaluation's majority baseline and confusion table."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from tbuild.builder import load_spec
from tbuild.builder.spec import TokenizerSpec
from tbuild.components.specs.special import BOS, EOS
from tbuild.engine.data.corpus import iter_split
from tbuild.engine.data.line_labels import encode_classified, read_classified, text_rows
from tbuild.engine.data.tokenizer import Tokenizer
from tbuild.engine.decoding.classifier import confusion, majority
from tbuild.engine.errors import DataError
from tbuild.engine.tasks.registry import task_of

TRAIN = "en\tthe dog runs\nde\tder Hund rennt\n\nfr\tle chien court\nen\ta man sits\n"


def spec_of(tmp: Path, labels: list[str] | str = "from_data", **splits: str):  # noqa: ANN201
    files = {"train": TRAIN} | splits
    for split, text in files.items():
        (tmp / f"{split}.tsv").write_text(text)
    return load_spec({"model": {"kind": "encoder_only", "d_model": 16, "encoder": {"layers": 1, "heads": 2},
                                "head": {"kind": "sequence_classification", "labels": labels}},
                      "data": {"dataset": {"kind": "classification", "source": "files"},
                               **{split: str(tmp / f"{split}.tsv") for split in files}}}).spec


def test_a_split_is_label_tab_text_lines_empty_lines_skipped(tmp_path: Path) -> None:
    split = read_classified(spec_of(tmp_path).data, "train")
    assert split.labels == ["en", "de", "fr", "en"] and split.lines == [1, 2, 4, 5]
    assert split.texts[2] == "le chien court" and split.file == tmp_path / "train.tsv"
    assert list(iter_split(spec_of(tmp_path).data, "train"))[0] == ("the dog runs", "en")  # (text, label)


def test_a_gzipped_split_reads_as_a_plain_one(tmp_path: Path) -> None:
    spec = spec_of(tmp_path)
    (tmp_path / "train.tsv").unlink()
    (tmp_path / "train.tsv.gz").write_bytes(gzip.compress(TRAIN.encode()))
    assert read_classified(spec.data, "train").labels == ["en", "de", "fr", "en"]


@pytest.mark.parametrize(("line", "problem"), [
    ("en the dog", "no tab"),
    ("\tthe dog", "an empty label"),
    ("  \tthe dog", "an empty label"),
    ("en\t", "no text after the tab"),
    ("en\t   ", "no text after the tab"),
])
def test_a_bad_line_is_one_error_naming_file_and_line(tmp_path: Path, line: str, problem: str) -> None:
    spec = spec_of(tmp_path, test=f"de\tein Hund\n{line}\n")
    with pytest.raises(DataError) as info:
        read_classified(spec.data, "test")
    assert str(info.value) == (f"data.test: {tmp_path}/test.tsv line 2: {problem} (each line is "
                               "LABEL<TAB>TEXT)")


def test_an_empty_or_missing_file_and_one_label_are_errors(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, test="\n\n")
    with pytest.raises(DataError, match=rf"^data.test: no LABEL<TAB>TEXT lines in {tmp_path}/test.tsv$"):
        read_classified(spec.data, "test")
    (tmp_path / "test.tsv").unlink()
    with pytest.raises(DataError, match=rf"^data.test: file not found: {tmp_path}/test.tsv$"):
        read_classified(spec.data, "test")
    (tmp_path / "train.tsv").write_text("en\ta\nen\tb\n")
    with pytest.raises(DataError, match="has 1 distinct label; a classification head needs at least 2"):
        task_of(spec).fit_labels(spec, lambda _: None)


def test_labels_are_fitted_sorted_and_an_unknown_one_names_its_line(tmp_path: Path) -> None:
    said: list[str] = []
    spec = spec_of(tmp_path, test="en\tthe cat\nit\til gatto\n")
    spec = task_of(spec).fit_labels(spec, said.append)
    assert spec.model.head.labels == ["de", "en", "fr"]  # type: ignore[union-attr]
    assert said == [f"model.head.labels: 3 labels from {tmp_path}/train.tsv"]
    tok = Tokenizer.train(["the dog runs", "der Hund rennt", "le chien court"] * 5, TokenizerSpec(vocab_size=40),
                          tmp_path / "spm")
    pairs = encode_classified(spec, "train", tok, lambda _: None)
    assert pairs.tgt == [[2], [1], [3], [2]]  # label index + 1 (PAD is no label), one per line
    assert all(row[0] == BOS and row[-1] == EOS for row in pairs.src) and list(pairs.tgt_lengths) == [1] * 4
    with pytest.raises(DataError, match=rf"^data.test: {tmp_path}/test.tsv line 2: label 'it' is not one of the "
                       r"model's 3 labels \(model.head.labels\)$"):
        encode_classified(spec, "test", tok, lambda _: None)
    listed = spec_of(tmp_path, labels=["en", "fr"])
    with pytest.raises(DataError, match=rf"^data.train: {tmp_path}/train.tsv line 2: label 'de' is not one"):
        encode_classified(listed, "train", tok, lambda _: None)


def test_rows_start_with_bos_and_are_cut_to_the_models_positions(tmp_path: Path) -> None:
    tok = Tokenizer.train(["a b c d e f g h"] * 10, TokenizerSpec(vocab_size=20), tmp_path / "spm")
    [row] = text_rows(tok, ["a b c d e f g h"], None)
    assert row == [BOS, *tok.encode(["a b c d e f g h"])[0], EOS] and len(row) > 5
    [cut] = text_rows(tok, ["a b c d e f g h"], 5)
    assert cut == row[:4] + [EOS]


def test_the_langid_split_is_written_from_the_three_sides_deterministically(tmp_path: Path) -> None:
    sides = {"en": "A dog runs.\nTwo men\n", "de": "Ein Hund rennt.\nZwei Männer\n", "fr": "Un chien court.\n\n"}
    for lang, text in sides.items():
        (tmp_path / f"val.{lang}.gz").write_bytes(gzip.compress(text.encode()))
    data = load_spec({"model": {"kind": "encoder_only", "head": {"kind": "sequence_classification"}},
                      "data": {"dataset": {"kind": "classification", "source": "multi30k-langid"},
                               "valid": str(tmp_path / "val")}}).spec.data
    said: list[str] = []
    split = read_classified(data, "valid", said.append)
    assert split.file == tmp_path / "val.langid.gz"
    assert said == [f"data.valid: wrote {tmp_path}/val.langid.gz: 5 lines, LANG<TAB>sentence for en, de, fr"]
    assert sorted(zip(split.labels, split.texts, strict=True)) == [
        ("de", "Ein Hund rennt."), ("de", "Zwei Männer"), ("en", "A dog runs."), ("en", "Two men"),
        ("fr", "Un chien court.")]
    first = split.file.read_bytes()
    split.file.unlink()
    read_classified(data, "valid")
    assert split.file.read_bytes() == first  # the same shuffle, the same bytes


def test_the_majority_baseline_and_the_confusion_table() -> None:
    assert majority(["en", "de", "de", "fr", "en"]) == "en"  # a tie: the label seen first
    table = confusion(["de", "en"], ["en", "en", "de"], ["en", "de", "de"])
    assert table == {"de": {"de": 1, "en": 0}, "en": {"de": 1, "en": 1}}

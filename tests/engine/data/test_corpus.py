"""Split files and reading parallel text: plain/gz, and one-line errors for bad input."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from tbuild.builder import load_spec
from tbuild.engine.data.corpus import read_parallel, split_files
from tbuild.engine.errors import DataError


def data_spec(**data):  # noqa: ANN201 - DataSpec
    return load_spec({"data": data}).spec.data


def write(path: Path, text: str | bytes) -> Path:
    raw = text.encode("utf-8") if isinstance(text, str) else text
    path.write_bytes(gzip.compress(raw) if path.suffix == ".gz" else raw)
    return path


def test_prefix_uses_langs_and_prefers_existing_gz(tmp_path: Path) -> None:
    write(tmp_path / "train.en", "a\n")
    write(tmp_path / "train.de.gz", "b\n")
    data = data_spec(train=str(tmp_path / "train"), source_lang="en", target_lang="de")
    assert split_files(data, "train") == (tmp_path / "train.en", tmp_path / "train.de.gz")


def test_parallel_files_are_used_as_given(tmp_path: Path) -> None:
    data = data_spec(valid={"source": str(tmp_path / "s.txt"), "target": str(tmp_path / "t.txt")})
    assert split_files(data, "valid") == (tmp_path / "s.txt", tmp_path / "t.txt")


def test_unset_split_is_an_error() -> None:
    with pytest.raises(DataError, match=r"^data\.test is not set in the spec$"):
        split_files(data_spec(), "test")
    with pytest.raises(DataError, match="unknown split 'dev'"):
        split_files(data_spec(), "dev")


def test_read_plain_and_gz_strip_whitespace_only(tmp_path: Path) -> None:
    src = write(tmp_path / "a.en", "  Hello world \r\nTab\tinside\n\nlast line without newline")
    # U+2028 and U+0085 are line breaks for str.splitlines but must not split a corpus line.
    tgt = write(tmp_path / "a.de.gz", "Hallo\u2028Welt\nb\n\nc\x85d\n")
    source, target = read_parallel(src, tgt, "data.train")
    assert source == ["Hello world", "Tab\tinside", "", "last line without newline"]
    assert target == ["Hallo\u2028Welt", "b", "", "c\x85d"]


def test_missing_file_names_field_and_path(tmp_path: Path) -> None:
    src = write(tmp_path / "a.en", "x\n")
    missing = tmp_path / "nope.de"
    with pytest.raises(DataError) as info:
        read_parallel(src, missing, "data.train")
    assert str(info.value) == f"data.train.target: file not found: {missing}"
    with pytest.raises(DataError, match=r"^data\.valid\.source: file not found: .*nope\.de$"):
        read_parallel(missing, src, "data.valid")


def read_error(src: Path, tgt: Path, field: str) -> str:
    """The message of the DataError that reading the pair raises; it must be one line."""
    with pytest.raises(DataError) as info:
        read_parallel(src, tgt, field)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_line_count_mismatch_gives_both_counts_and_paths(tmp_path: Path) -> None:
    src = write(tmp_path / "a.en", "1\n2\n3\n")
    tgt = write(tmp_path / "a.de", "1\n2\n")
    message = read_error(src, tgt, "data.train")
    assert message == f"data.train: line counts differ: 3 lines in {src} but 2 lines in {tgt}"


@pytest.mark.parametrize("name", ["bad.en", "bad.en.gz"])
def test_invalid_utf8_names_file_and_line(tmp_path: Path, name: str) -> None:
    bad = write(tmp_path / name, b"fine\nstill fine\nbro\xffken\nafter\n")
    good = write(tmp_path / "good.de", "1\n2\n3\n4\n")
    message = read_error(bad, good, "data.train")
    assert message.startswith(f"data.train.source: {bad}: line 3 is not valid UTF-8")


@pytest.mark.parametrize("payload", ["garbage", "truncated"])
def test_corrupt_gzip_names_file(tmp_path: Path, payload: str) -> None:
    whole = gzip.compress(("line\n" * 1000).encode())
    data = b"this is not gzip at all" if payload == "garbage" else whole[: len(whole) // 2]
    bad = tmp_path / "c.de.gz"
    bad.write_bytes(data)
    good = write(tmp_path / "c.en", "x\n")
    message = read_error(good, bad, "data.test")
    assert message.startswith(f"data.test.target: {bad}: corrupt gzip file")


def test_gzip_content_under_a_plain_name_is_decompressed(tmp_path: Path) -> None:
    src = tmp_path / "s.en"
    src.write_bytes(gzip.compress(b"zipped\n"))
    tgt = write(tmp_path / "t.de", "plain\n")
    assert read_parallel(src, tgt, "data.train") == (["zipped"], ["plain"])


def test_a_directory_is_not_a_file(tmp_path: Path) -> None:
    good = write(tmp_path / "s.en", "x\n")
    with pytest.raises(DataError, match=r"^data\.train\.target: is not a file: "):
        read_parallel(good, tmp_path, "data.train")


@pytest.mark.parametrize(("dataset", "layout"), [
    (None, "PAIRS"), ({"kind": "files"}, "PAIRS"), ({"kind": "treebank"}, "PAIRS"), ({"kind": "multi30k"}, "PAIRS"),
    ({"kind": "multi30k", "side": "de"}, "TEXT"), ({"kind": "text"}, "TEXT"), ({"kind": "tagging"}, "WORD_LABELS"),
    ({"kind": "classification"}, "LINE_LABELS")])
def test_each_data_set_declares_its_layout(dataset: dict | None, layout: str) -> None:
    """Pairs, one text file (no source side: the tokenizer learns the target), words and their tags, or
    LABEL<TAB>TEXT lines (the tokenizer learns the words or the text alone)."""
    from tbuild.builder.spec import DataSpec
    from tbuild.engine.data import corpus

    found = corpus.layout_of(DataSpec.model_validate({"dataset": dataset}))
    assert found is getattr(corpus, layout)
    assert (found.unit, found.sourced, found.text) == {
        "PAIRS": ("pairs", True, (0, 1)), "TEXT": ("lines", False, (1,)), "WORD_LABELS": ("pairs", True, (0,)),
        "LINE_LABELS": ("lines", True, (0,))}[layout]

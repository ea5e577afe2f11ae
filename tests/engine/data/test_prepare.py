"""Preparing the training split: streamed, encoded in workers, filtered, memory-mapped, atomic,
reused while up to date and rebuilt (saying why) when not."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest

from tbuild.components.specs.special import DEFAULT, EOS, PAD
from tbuild.engine.data import prepare as prepare_module
from tbuild.engine.data.batches import collate, token_batches
from tbuild.engine.data.mapped import MappedPairs, MappedWriter, token_dtype
from tbuild.engine.data.pairs import Pairs
from tbuild.engine.data.prepare import prepared_train
from tbuild.engine.data.tokenizer import Tokenizer, prepare_tokenizer
from tbuild.engine.errors import DataError
from tbuild.engine.run.directory import RunDir
from tests.engine.data.test_pairs import corpus, make_spec


@pytest.fixture(scope="module")
def tok(val_pairs: tuple[list[str], list[str]], tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    en, de = val_pairs
    folder = tmp_path_factory.mktemp("corpus")
    return prepare_tokenizer(make_spec({"train": corpus(folder, "train", en, de)}), RunDir(folder / "run"),
                             lambda _: None)


def run_for(tmp_path: Path) -> RunDir:
    return RunDir(tmp_path / "run")


def test_filters_drop_and_count_and_rows_are_the_encodings(tmp_path: Path, tok: Tokenizer,
                                                            val_pairs: tuple[list[str], list[str]]) -> None:
    en = val_pairs[0]
    src, tgt = list(en[:40]), list(en[:40])  # identical sides: length ratio 1
    long_sentence = "A man in a blue shirt is riding a red bike down the busy street today."
    src += ["", "A dog.", "dog " * 300, long_sentence]
    tgt += ["Ein Hund.", "", "Hund", "Mann"]
    spec = make_spec({"train": corpus(tmp_path, "train", src, tgt), "max_length": 256, "max_length_ratio": 3})
    logs: list[str] = []
    pairs = prepared_train(spec, tok, run_for(tmp_path), logs.append)
    assert len(pairs) == 40 and pairs.header["dropped"] == {"empty": 2, "long": 1, "ratio": 1, "words": 0}
    assert logs[-1].startswith(f"data.train: kept 40 of 44 pairs from {tmp_path / 'train.en'}, "
                               f"{tmp_path / 'train.de'}; dropped 2 empty, 1 longer than 256 tokens, "
                               "1 over length ratio 3.0 (")
    expected = Pairs([ids + [EOS] for ids in tok.encode(src[:40])], [ids + [EOS] for ids in tok.encode(tgt[:40])])
    np.testing.assert_array_equal(pairs.src_lengths, expected.src_lengths)
    rows = np.arange(40)
    for side in ("src", "tgt"):
        np.testing.assert_array_equal(pairs.padded(rows, side, PAD), expected.padded(rows, side, PAD))
    for batch in token_batches(pairs.src_lengths, pairs.tgt_lengths, 300, seed=1, epoch=0):
        for mapped, memory in zip(collate(pairs, batch, DEFAULT), collate(expected, batch, DEFAULT), strict=True):
            assert mapped.equal(memory)  # the memory-mapped and in-memory sources give the same batches


def test_word_filters_before_tokenizing(tmp_path: Path, tok: Tokenizer) -> None:
    """The usual WMT filter (clean-corpus-n): at most max_words words a side, a word ratio of at most
    max_words_ratio; the prepared data is rebuilt when they change and kept when they are unset."""
    src = ["a b c", "a b c d e f", "a b c d", "one", "x y"]
    tgt = ["a b c", "a b", "a b c d", "one two", ""]
    folder = corpus(tmp_path, "train", src, tgt)
    logs: list[str] = []
    pairs = prepared_train(make_spec({"train": folder, "max_words": 4, "max_words_ratio": 1.5}), tok,
                           run_for(tmp_path), logs.append)
    # kept: "a b c" and "a b c d"; words: 6 > 4 (and ratio 3), ratio 2.0 > 1.5; the empty side is the token filter's
    assert len(pairs) == 2 and pairs.header["dropped"] == {"empty": 1, "long": 0, "ratio": 0, "words": 2}
    assert logs[-1].split("; ")[1].startswith("dropped 1 empty, 0 longer than 256 tokens, 0 over length ratio -, "
                                              "2 over 4 words or word ratio 1.5 (")
    assert pairs.header["filters"] == {"max_length": 256, "max_length_ratio": None, "max_words": 4,
                                       "max_words_ratio": 1.5}
    unfiltered = prepared_train(make_spec({"train": folder}), tok, run_for(tmp_path), logs.append)
    assert len(unfiltered) == 4 and "filters changed" in logs[-2]
    assert unfiltered.header["filters"] == {"max_length": 256, "max_length_ratio": None}


def test_max_length_counts_eos(tmp_path: Path, tok: Tokenizer, val_pairs: tuple[list[str], list[str]]) -> None:
    en = val_pairs[0]
    n = len(tok.encode([en[0]])[0])
    folder = corpus(tmp_path, "train", [en[0], "A dog."], [en[0], "A dog."])
    assert len(prepared_train(make_spec({"train": folder, "max_length": n + 1}), tok, run_for(tmp_path),
                              lambda _: None)) == 2
    logs: list[str] = []
    cut = prepared_train(make_spec({"train": folder, "max_length": n}), tok, run_for(tmp_path), logs.append)
    assert len(cut) == 1 and "filters changed" in logs[0] and f"1 longer than {n} tokens" in logs[-1]


def test_nothing_there_or_nothing_left(tmp_path: Path, tok: Tokenizer) -> None:
    empty = make_spec({"train": corpus(tmp_path, "empty", [], [])})
    with pytest.raises(DataError, match=r"^data\.train: no lines in "):
        prepared_train(empty, tok, run_for(tmp_path), lambda _: None)
    spec = make_spec({"train": corpus(tmp_path, "train", ["", "x"], ["y", ""])})
    with pytest.raises(DataError, match=r"^data\.train: no pairs left after filtering \(dropped 2 empty"):
        prepared_train(spec, tok, run_for(tmp_path), lambda _: None)
    assert not run_for(tmp_path).prepared("train").exists()
    assert os.listdir(run_for(tmp_path).prepared("train").parent) == []  # no temporary folder left


def test_bad_input_is_one_line(tmp_path: Path, tok: Tokenizer, val_pairs: tuple[list[str], list[str]]) -> None:
    en, de = val_pairs
    (tmp_path / "bad.en").write_bytes(b"fine\nbro\xffken\n")
    (tmp_path / "bad.de").write_text("gut\nkaputt\n")
    with pytest.raises(DataError, match=r"^data\.train\.source: .*bad\.en: line 2 is not valid UTF-8"):
        prepared_train(make_spec({"train": str(tmp_path / "bad")}), tok, run_for(tmp_path), lambda _: None)
    uneven = corpus(tmp_path, "uneven", en[:5], de[:3])
    with pytest.raises(DataError, match=r"line counts differ: 5 lines in .*uneven\.en but 3 lines in .*uneven\.de$"):
        prepared_train(make_spec({"train": uneven}), tok, run_for(tmp_path), lambda _: None)
    assert not run_for(tmp_path).prepared("train").exists()


def test_reused_while_up_to_date_and_rebuilt_saying_why(
    tmp_path: Path, tok: Tokenizer, val_pairs: tuple[list[str], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    en, de = val_pairs
    train = corpus(tmp_path, "train", en[:100], de[:100])
    spec, run = make_spec({"train": train}), run_for(tmp_path)
    first = prepared_train(spec, tok, run, lambda _: None)

    def no_encoding(*args: object) -> None:
        raise AssertionError("a prepared split must not be encoded again")

    monkeypatch.setattr(prepare_module, "encode_chunk", no_encoding)
    logs: list[str] = []
    again = prepared_train(spec, tok, run, logs.append)
    assert logs == [f"data.train: 100 prepared pairs in {run.prepared('train')}"]
    np.testing.assert_array_equal(again.tgt_lengths, first.tgt_lengths)
    monkeypatch.undo()
    other = prepare_tokenizer(make_spec({"train": train, "tokenizer": {"vocab_size": 150}}),
                              RunDir(tmp_path / "other"), lambda _: None)
    prepared_train(spec, other, run, logs.append)
    assert "(it was encoded with another tokenizer)" in logs[1]
    Path(train + ".en").write_text("".join(s + "\n" for s in en[100:200]))
    Path(train + ".de").write_text("".join(s + "\n" for s in de[100:200]))
    prepared_train(spec, other, run, logs.append)
    assert "(the source files changed)" in logs[-2]


def test_a_killed_or_failed_preparation_leaves_nothing_that_looks_complete(
    tmp_path: Path, tok: Tokenizer, val_pairs: tuple[list[str], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    en, de = val_pairs
    spec, run = make_spec({"train": corpus(tmp_path, "train", en[:300], de[:300])}), run_for(tmp_path)
    monkeypatch.setattr(prepare_module, "CHUNK_PAIRS", 100)
    real = prepare_module.encode_chunk
    calls = []

    def dies_on_the_third_chunk(sources: list[str], targets: list[str]) -> object:
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(sources, targets)

    monkeypatch.setattr(prepare_module, "encode_chunk", dies_on_the_third_chunk)
    with pytest.raises(KeyboardInterrupt):
        prepared_train(spec, tok, run, lambda _: None)
    folder = run.prepared("train")
    assert not folder.exists() and os.listdir(folder.parent) == []
    leftover = folder.parent / f".train.tmp-{2**22 + 12345}"  # a temporary folder of a process that is gone
    leftover.mkdir()
    (leftover / "src.tokens").write_bytes(b"\0" * 10)
    monkeypatch.setattr(prepare_module, "encode_chunk", real)
    assert len(prepared_train(spec, tok, run, lambda _: None)) == 300
    assert sorted(os.listdir(folder.parent)) == ["train"]


def test_full_disk_keeps_nothing(tmp_path: Path, tok: Tokenizer, val_pairs: tuple[list[str], list[str]],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    en, de = val_pairs
    spec, run = make_spec({"train": corpus(tmp_path, "train", en[:50], de[:50])}), run_for(tmp_path)

    def full(self: MappedWriter, side: str, tokens: np.ndarray, lengths: np.ndarray) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(MappedWriter, "append", full)
    with pytest.raises(DataError) as info:
        prepared_train(spec, tok, run, lambda _: None)
    assert str(info.value).startswith("data.train: no space left on the device while writing ")
    assert "\n" not in str(info.value)
    assert os.listdir(run.prepared("train").parent) == []


def test_worker_processes_give_the_same_arrays(tmp_path: Path, tok: Tokenizer, val_pairs: tuple[list[str], list[str]],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    en, de = val_pairs
    monkeypatch.setattr(prepare_module, "CHUNK_PAIRS", 40)  # 15 chunks: several in flight at once
    spec = make_spec({"train": corpus(tmp_path, "train", en, de)})
    inline = prepared_train(spec, tok, RunDir(tmp_path / "one"), lambda _: None, workers=1)
    pooled = prepared_train(spec, tok, RunDir(tmp_path / "two"), lambda _: None, workers=2)
    for side in ("src", "tgt"):
        np.testing.assert_array_equal(np.asarray(inline.tokens[side]), np.asarray(pooled.tokens[side]))
        np.testing.assert_array_equal(np.asarray(inline.offsets[side]), np.asarray(pooled.offsets[side]))


def test_ids_are_uint16_under_65536_pieces_else_uint32(tmp_path: Path) -> None:
    assert token_dtype(8000) == np.uint16 and token_dtype(65536) == np.uint16 and token_dtype(65537) == np.uint32
    writer = MappedWriter(tmp_path / "big", token_dtype(100_000))
    writer.append("src", np.array([70_000, EOS, 5, EOS]), np.array([2, 2]))
    writer.append("tgt", np.array([99_999, 1, EOS, EOS]), np.array([3, 1]))
    writer.commit({})
    pairs = MappedPairs(tmp_path / "big")
    assert pairs.tokens["src"].dtype == np.dtype("<u4") and len(pairs) == 2
    assert pairs.padded(np.array([1, 0]), "tgt", PAD).tolist() == [[EOS, PAD, PAD], [99_999, 1, EOS]]
    (tmp_path / "big" / "tgt.lengths").write_bytes(b"\0")
    with pytest.raises(DataError, match=r"tgt\.lengths: prepared data is damaged \(1 bytes, expected 8\)"):
        MappedPairs(tmp_path / "big")


def test_workers_start_from_a_script_without_a_main_guard(tmp_path: Path, tok: Tokenizer,
                                                           val_pairs: tuple[list[str], list[str]]) -> None:
    """Preparation called from code read on stdin (no ``__main__`` file to re-import, no guard)."""
    en, de = val_pairs
    import subprocess
    import sys

    folder = corpus(tmp_path, "train", en, de)
    code = f"""
from pathlib import Path
from tbuild.builder import load_spec
from tbuild.engine.data import prepare
from tbuild.engine.data.tokenizer import Tokenizer
from tbuild.engine.run.directory import RunDir
prepare.CHUNK_PAIRS = 40
spec = load_spec({{"data": {{"train": {folder!r}}}}}).spec
pairs = prepare.prepared_train(spec, Tokenizer.load(Path({str(tok.path)!r})), RunDir(Path({str(tmp_path / 'run')!r})),
                               print, workers=2)
print("pairs", len(pairs))
"""
    done = subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "pairs 600" in done.stdout

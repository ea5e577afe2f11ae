"""A language model's data: one side of text per split (data.dataset text, or multi30k with side),
read as pairs with an empty source (EOS alone once encoded), empty lines skipped, prepared like pairs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tbuild.builder import load_spec
from tbuild.components.specs.special import EOS
from tbuild.engine.data.corpus import iter_split, split_paths
from tbuild.engine.data.datasets import ensure_data, read_split
from tbuild.engine.data.pairs import load_pairs
from tbuild.engine.data.prepare import prepared_train
from tbuild.engine.data.tokenizer import prepare_tokenizer
from tbuild.engine.errors import DataError
from tbuild.engine.run.directory import RunDir
from tests.conftest import multi30k_lines


def lm_spec(**data):  # noqa: ANN201 - Spec
    return load_spec({"model": {"kind": "decoder_only"}, "data": data}).spec


def test_text_lines_are_pairs_with_an_empty_source(tmp_path: Path) -> None:
    (tmp_path / "train.txt").write_text("ein Hund\n\n  zwei Katzen \n")
    spec = lm_spec(dataset="text", train=str(tmp_path / "train.txt"))
    assert split_paths(spec.data, "train") == (tmp_path / "train.txt",)
    assert list(iter_split(spec.data, "train")) == [("", "ein Hund"), ("", "zwei Katzen")]  # the empty line skipped
    missing = lm_spec(dataset="text", train=str(tmp_path / "train.txt"), valid=str(tmp_path / "valid.txt"))
    with pytest.raises(DataError, match=r"^data\.valid: file not found: .*valid\.txt$"):
        ensure_data(missing.data)


def test_multi30k_side_reads_one_language(multi30k: Path, tmp_path: Path) -> None:
    spec = lm_spec(dataset={"kind": "multi30k", "side": "de"}, valid=str(multi30k / "val"))
    assert split_paths(spec.data, "valid") == (multi30k / "val.de.gz",)
    sources, lines = read_split(spec.data, "valid", lambda _: None)
    assert lines[:50] == [line.strip() for line in multi30k_lines(multi30k, "val.de.gz", 50)]
    assert set(sources) == {""} and len(lines) == 1014


def test_tokenizer_pairs_and_prepared_split(val_pairs: tuple[list[str], list[str]], tmp_path: Path) -> None:
    de = val_pairs[1][:300]
    (tmp_path / "train.txt").write_text("\n".join(de) + "\n\n")
    (tmp_path / "valid.txt").write_text("\n".join(de[:10]) + "\n")
    spec = lm_spec(dataset="text", train=str(tmp_path / "train.txt"), valid=str(tmp_path / "valid.txt"),
                   tokenizer={"vocab_size": 300})
    run, said = RunDir(tmp_path / "run"), []
    tok = prepare_tokenizer(spec, run, said.append)
    assert "training a bpe model, vocab 300, on 300 sentences" in said[-1]
    valid = load_pairs(spec, "valid", tok, said.append)
    assert valid.src == [[EOS]] * 10 and valid.tgt == [ids + [EOS] for ids in tok.encode(de[:10])]
    prepared = prepared_train(spec, tok, run, said.append)
    assert len(prepared) == 300 and prepared.src_lengths.tolist() == [1] * 300  # EOS-only sources
    assert "kept 300 of 300 lines" in said[-1]

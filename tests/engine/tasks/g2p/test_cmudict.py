"""The cmudict data set: a dictionary file read as each word's first pronunciation (variants and comments left out,
stress digits kept or dropped), a word's split fixed by its spelling, a malformed line refused in one line naming
it, and (where $TBUILD_DATA_MIRROR holds cmudict.dict) the three splits written as pinned."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.engine.errors import DataError
from tbuild.engine.tasks.g2p import cmudict

DICT = "'bout B AW1 T\nhello HH AH0 L OW1\nhello(2) HH EH0 L OW1\nread R IY1 D # a comment\nread(2) R EH1 D\n"


def test_a_dictionary_is_each_words_first_pronunciation(tmp_path: Path) -> None:
    path = tmp_path / "cmudict.dict"
    path.write_text(DICT)
    assert cmudict.entries(path) == {"'bout": "B AW1 T", "hello": "HH AH0 L OW1", "read": "R IY1 D"}
    assert cmudict.entries(path, stress=False)["hello"] == "HH AH L OW"
    path.write_text("hello\n")
    with pytest.raises(DataError, match=r"cmudict.dict:1: not a cmudict entry"):
        cmudict.entries(path)


def test_a_word_is_spelled_and_its_split_fixed_by_its_spelling() -> None:
    assert cmudict.spelled("Hello") == "h e l l o" and cmudict.spelled(" x-ray ") == "x - r a y"
    splits = [cmudict.split_of(f"word{n}") for n in range(2000)]
    assert {s: splits.count(s) for s in ("train", "valid", "test")} == pytest.approx(
        {"train": 1800, "valid": 100, "test": 100}, abs=40)
    assert cmudict.split_of("hello") == cmudict.split_of("hello")


MIRROR = os.environ.get("TBUILD_DATA_MIRROR")


@pytest.mark.skipif(not MIRROR or not (Path(MIRROR) / "cmudict" / "cmudict.dict").is_file(),
                    reason="needs $TBUILD_DATA_MIRROR/cmudict/cmudict.dict")
def test_the_splits_are_written_as_pinned(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"data: {{dataset: cmudict, train: {tmp_path}/train, valid: {tmp_path}/valid, "
                    f"test: {tmp_path}/test}}\n")
    result = CliRunner().invoke(app, ["data", "fetch", str(spec)])
    assert result.exit_code == 0, result.output
    for split, words in cmudict.WORDS.items():
        letters = (tmp_path / f"{split}.word").read_text().splitlines()
        phones = (tmp_path / f"{split}.phones").read_text().splitlines()
        assert len(letters) == len(phones) == words
    assert "h e l l o" in (tmp_path / f"{cmudict.split_of('hello')}.word").read_text().splitlines()

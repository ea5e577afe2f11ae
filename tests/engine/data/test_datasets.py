"""Data sets: the provider of ``data.dataset`` fetches missing split files (Multi30k from a mirror here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tbuild.builder.spec import DATASETS
from tbuild.engine.data.corpus import read_parallel, split_files
from tbuild.engine.data.datasets import ensure_data, fetch_data, read_split
from tbuild.engine.errors import DataError
from tests.engine.data.test_corpus import data_spec


def test_every_declared_data_set_has_a_provider() -> None:
    """The built-in data sets first, then those the tasks' folders declare (summarization's, g2p's...)."""
    keys = [e.key for e in DATASETS.entries()]
    assert keys[:7] == ["multi30k", "wmt14", "files", "treebank", "text", "tagging", "classification"]
    assert {"aeslc", "scitldr", "cmudict"} <= set(keys[7:])
    assert all(e.block is not None and hasattr(e.block, "ensure") for e in DATASETS.entries())


def test_read_split_refuses_an_empty_split(tmp_path: Path) -> None:
    (tmp_path / "e.en").write_text("")
    (tmp_path / "e.de").write_text("")
    with pytest.raises(DataError, match=r"^data\.valid: no lines in .*e\.en and .*e\.de$"):
        read_split(data_spec(valid=str(tmp_path / "e")), "valid", lambda _: None)


def test_ensure_data_ignores_other_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TBUILD_DATA_MIRROR", str(tmp_path / "absent"))  # never looked at
    ensure_data(data_spec(train=str(tmp_path / "train")))
    assert list(tmp_path.iterdir()) == []


def test_ensure_data_fetches_missing_multi30k(tmp_path: Path, multi30k: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TBUILD_DATA_MIRROR", str(multi30k))
    dest = tmp_path / "m30k"
    data = data_spec(dataset="multi30k", source_lang="en", target_lang="fr",
                     valid=str(dest / "val"), test=str(dest / "test2016"))
    logged: list[str] = []
    ensure_data(data, logged.append)
    assert split_files(data, "valid") == (dest / "val.en.gz", dest / "val.fr.gz")
    assert (dest / "test2016.fr.gz").is_file() and not (dest / "val.de.gz").exists()
    assert len(read_parallel(*split_files(data, "test"), "data.test")[1]) == 1000
    assert logged and "fetching Multi30k" in logged[0]


def test_ensure_data_names_what_multi30k_provides(tmp_path: Path, multi30k: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TBUILD_DATA_MIRROR", str(multi30k))
    provides = r"data\.valid: .*dev\.en not found; Multi30k provides train\.<lang>\.gz"
    with pytest.raises(DataError, match=provides):
        ensure_data(data_spec(dataset="multi30k", valid=str(tmp_path / "dev")))
    with pytest.raises(DataError, match="multi30k has languages en, de, fr, not cs"):
        ensure_data(data_spec(dataset="multi30k", target_lang="cs", valid=str(tmp_path / "val")))


def test_files_data_set_names_the_missing_files(tmp_path: Path) -> None:
    (tmp_path / "train.en").write_text("a\n")
    (tmp_path / "train.de").write_text("b\n")
    data = data_spec(dataset="files", train=str(tmp_path / "train"), valid=str(tmp_path / "dev"))
    with pytest.raises(DataError) as info:
        ensure_data(data)
    assert str(info.value) == f"data.valid: file not found: {tmp_path / 'dev.en'} and {tmp_path / 'dev.de'}"
    (tmp_path / "dev.en").write_text("c\n")
    with pytest.raises(DataError, match=r"^data\.valid: file not found: \S*dev\.de$"):
        ensure_data(data)
    (tmp_path / "dev.de.gz").write_bytes(b"")
    ensure_data(data)  # plain or .gz


def test_fetch_data_checks_a_spec_without_data_set_as_files(tmp_path: Path) -> None:
    data = data_spec(train=str(tmp_path / "train"))
    ensure_data(data)  # no data set: the readers report missing files when they read them
    with pytest.raises(DataError, match=r"^data\.train: file not found: .*train\.en and .*train\.de$"):
        fetch_data(data)

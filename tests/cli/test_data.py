"""`tbuild data`: `fetch` (a wmt14 spec from a mirror folder of fake archives, own files checked) and
`prepare` (the run's tokenizer and memory-mapped training split, reused by `train`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tests.conftest import tiny_train_spec
from tests.engine.data.test_wmt14 import ARCHIVES, point_at, tgz

ENV = {"COLUMNS": "300"}


def fake_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, members: dict[str, dict[str, str]]) -> Path:
    """A mirror folder of fake WMT14 archives, pinned in wmt14 and sacreBLEU's catalogue (no network)."""
    archives = {name: tgz(files) for name, files in members.items()}
    point_at(monkeypatch, archives, "http://127.0.0.1:1", tmp_path / "sacrebleu")
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for name, body in archives.items():
        (mirror / name).write_bytes(body)
    return mirror


def test_fetch_wmt14_from_a_mirror_then_nothing_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TBUILD_DATA_MIRROR", raising=False)
    mirror = fake_mirror(tmp_path, monkeypatch, ARCHIVES)
    spec = tmp_path / "wmt.yaml"
    spec.write_text("data:\n  dataset: wmt14\n  train: data/train\n  valid: data/newstest2013\n"
                    "  test: data/newstest2014\n")
    runner = CliRunner()
    result = runner.invoke(app, ["data", "fetch", str(spec), "--mirror", str(mirror)], env=ENV)
    assert result.exit_code == 0, result.output
    data = tmp_path / "data"
    assert "data.train: 4 sentence pairs" in result.stdout
    assert f"data.test: {data / 'newstest2014.en'}, {data / 'newstest2014.de'}" in result.stdout
    assert (data / "train.de").read_text().splitlines() == ["Europarl eins", "Europarl zwei", "Crawl eins", "NC eins"]
    result = runner.invoke(app, ["data", "fetch", str(spec), "--set", "data.test=null"], env=ENV)  # no mirror needed
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [f"data.train: {data / 'train.en'}, {data / 'train.de'}",
                                          f"data.valid: {data / 'newstest2013.en'}, {data / 'newstest2013.de'}"]


def test_fetch_own_files_names_the_missing_ones(tmp_path: Path) -> None:
    spec = tmp_path / "own.yaml"
    spec.write_text("data:\n  train: corpus/train\n")
    result = CliRunner().invoke(app, ["data", "fetch", str(spec)], env=ENV)
    assert result.exit_code == 2 and result.stdout == ""
    corpus = tmp_path / "corpus"
    assert result.stderr.strip() == (f"error: data.train: file not found: {corpus / 'train.en'} and "
                                     f"{corpus / 'train.de'}")


runner = CliRunner()


def test_prepare_then_train_reuses_the_prepared_split(tiny_corpus: Path, tmp_path: Path) -> None:
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(tiny_train_spec(tiny_corpus, tmp_path / "run", max_steps=2)))
    result = runner.invoke(app, ["data", "prepare", str(spec_file)])
    assert result.exit_code == 0, result.output
    header = yaml.safe_load((tmp_path / "run" / "prepared" / "train" / "header.json").read_text())
    kept = header["pairs"]
    assert "training a shared bpe model" in result.output and f"kept {kept} of 400 pairs" in result.output
    assert f"{kept} pairs, " in result.output and "(uint16)" in result.output
    trained = runner.invoke(app, ["train", str(spec_file)])
    assert trained.exit_code == 0, trained.output
    assert f"data.train: {kept} prepared pairs in" in trained.output and "kept" not in trained.output
    again = runner.invoke(app, ["data", "prepare", str(tmp_path / "run"), "--set", "data.max_length=20"])
    assert again.exit_code == 0 and "filters changed" in again.output, again.output


def test_prepare_reports_bad_data_on_one_line(tmp_path: Path) -> None:
    (tmp_path / "t.en").write_text("a\nb\n")
    (tmp_path / "t.de").write_text("a\n")
    spec = {"output_dir": str(tmp_path / "run"), "data": {"train": str(tmp_path / "t"),
                                                           "tokenizer": {"vocab_size": 16}}}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = runner.invoke(app, ["data", "prepare", str(tmp_path / "spec.yaml")])
    assert result.exit_code == 2
    assert "line counts differ: 2 lines in" in result.output and "Traceback" not in result.output


def test_a_wmt14_spec_trains_and_evaluates_from_a_mirror(tiny_corpus: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The paper's data path end to end, offline: fake WMT14 archives (Multi30k sentences under the
    real member names) in a mirror folder; `tbuild train` fetches, prepares and trains; evaluate
    scores newstest2014."""
    en, de = ((tiny_corpus / f"train.{lang}").read_text() for lang in ("en", "de"))
    members = {name: dict(files) for name, files in ARCHIVES.items()}
    members["training-parallel-europarl-v7.tgz"].update({"training/europarl-v7.de-en.en": en,
                                                         "training/europarl-v7.de-en.de": de})
    monkeypatch.setenv("TBUILD_DATA_MIRROR", str(fake_mirror(tmp_path, monkeypatch, members)))
    spec = tiny_train_spec(tiny_corpus, tmp_path / "run", max_steps=3, validate_every=3)
    spec["data"].update(dataset="wmt14", train=str(tmp_path / "wmt" / "train"),
                        valid=str(tmp_path / "wmt" / "newstest2013"), test=str(tmp_path / "wmt" / "newstest2014"))
    (tmp_path / "wmt.yaml").write_text(yaml.safe_dump(spec))
    trained = runner.invoke(app, ["train", str(tmp_path / "wmt.yaml")], env=ENV)
    assert trained.exit_code == 0, trained.output
    header = yaml.safe_load((tmp_path / "run" / "prepared" / "train" / "header.json").read_text())
    assert header["source_pairs"] == 400 + 2  # the Multi30k slice as Europarl, one pair each of the others
    assert "fetching the WMT14 en-de training corpora" in trained.output
    assert f"kept {header['pairs']} of 402 pairs" in trained.output
    scored = runner.invoke(app, ["evaluate", str(tmp_path / "run"), "--split", "test", "--beam", "1"], env=ENV)
    assert scored.exit_code == 0, scored.output
    assert "on newstest2014 (1 sentences" in scored.output or "(1 sentences" in scored.output

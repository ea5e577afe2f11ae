"""`tbuild data fetch SPEC`: a wmt14 spec from a mirror folder (fake archives), own files checked."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tbuild.cli.app import app
from tests.engine.data.test_wmt14 import ARCHIVES, point_at, tgz

ENV = {"COLUMNS": "300"}


def test_fetch_wmt14_from_a_mirror_then_nothing_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TBUILD_DATA_MIRROR", raising=False)
    archives = {name: tgz(members) for name, members in ARCHIVES.items()}
    point_at(monkeypatch, archives, "http://127.0.0.1:1", tmp_path / "sacrebleu")
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for name, body in archives.items():
        (mirror / name).write_bytes(body)
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
    assert result.exit_code == 1 and result.stdout == ""
    corpus = tmp_path / "corpus"
    assert result.stderr.strip() == (f"error: data.train: file not found: {corpus / 'train.en'} and "
                                     f"{corpus / 'train.de'}")

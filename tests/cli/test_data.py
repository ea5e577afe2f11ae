"""`tbuild data prepare`: the run's tokenizer and memory-mapped training split, reused by `train`."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tests.conftest import tiny_train_spec

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
    assert result.exit_code == 1
    assert "line counts differ: 2 lines in" in result.output and "Traceback" not in result.output

"""data.tokenizer.sampling from the command line: prepare, train, a change said and applied, the card."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tests.conftest import tiny_train_spec

runner = CliRunner()
WIDE = {"COLUMNS": "300"}


def test_train_with_sampling_end_to_end(tiny_corpus: Path, tmp_path: Path) -> None:
    run, path = tmp_path / "run", tmp_path / "spec.yaml"
    spec = tiny_train_spec(tiny_corpus, run, max_steps=3, validate_every=3, checkpoint_every=3)
    spec["data"]["tokenizer"]["sampling"] = {"alpha": 0.1, "variants": 2}
    path.write_text(yaml.safe_dump(spec))

    prepared = runner.invoke(app, ["data", "prepare", str(path)], env=WIDE)
    assert prepared.exit_code == 0, prepared.output
    assert "sampled variants (alpha 0.1)" in prepared.output and "(2 sampled variants stacked)" in prepared.output
    trained = runner.invoke(app, ["train", str(path)], env=WIDE)
    assert trained.exit_code == 0, trained.output
    header = json.loads((run / "prepared" / "train" / "header.json").read_text())
    assert header["sampling"] == {"alpha": 0.1, "nbest": -1, "variants": 2, "seed": 1}
    assert f"{header['variants'][0]:,} training pairs" in trained.output
    assert yaml.safe_load((run / "spec.yaml").read_text())["data"]["tokenizer"]["sampling"]["alpha"] == 0.1

    change = ["--set", "data.tokenizer.sampling.alpha=0.2", "--set", "train.max_steps=4"]
    dry = runner.invoke(app, ["train", str(path), *change, "--dry-run"], env=WIDE)
    assert dry.exit_code == 0, dry.output
    assert "data.tokenizer.sampling.alpha: 0.1 → 0.2 (the training split is encoded again" in dry.output
    resumed = runner.invoke(app, ["train", str(path), *change], env=WIDE)
    assert resumed.exit_code == 0, resumed.output
    assert "(data.tokenizer.sampling changed from {'alpha': 0.1" in resumed.output
    assert "prepared anew since step 3: reading it from the start of epoch 2" in resumed.output

    card = runner.invoke(app, ["card", str(run)], env=WIDE)
    assert card.exit_code == 0, card.output
    assert "pairs in each of 2 sampled encodings" in card.output


def test_a_labelled_data_set_refuses_sampling_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("data:\n  dataset: tagging\n  tokenizer: {sampling: {alpha: 0.1}}\n")
    result = runner.invoke(app, ["validate", str(path)], env=WIDE)
    assert result.exit_code == 2
    assert f"{path}:3:" in result.output and "data.tokenizer.sampling: data set 'tagging' holds labels" in result.output
    assert "Traceback" not in result.output

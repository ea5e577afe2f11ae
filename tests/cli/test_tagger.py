"""A part-of-speech tagger (model.kind encoder_only) end to end through the CLI on a toy file: train a few
steps, evaluate (accuracy in [0, 1], the baseline as computed by hand), decode (one line of tags per input
line, one tag per word), inspect; export refuses it in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tests.cli.toy_tagger import TEST, toy_tagger

runner = CliRunner()



@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run directory of a tiny tagger trained 3 steps on the toy files."""
    run, output = toy_tagger(tmp_path_factory.mktemp("tagger"))
    assert "model.head.labels: 6 tags" in output and "accuracy" in output
    fitted = yaml.safe_load((run / "spec.yaml").read_text())
    assert fitted["model"]["head"]["labels"] == ["DT", "MD", "NN", "NNS", "PRP", "VBZ"]
    return run


def test_evaluate_reports_accuracy_and_the_baseline(trained: Path) -> None:
    result = runner.invoke(app, ["evaluate", str(trained), "--split", "test"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "accuracy" in result.output and "baseline" in result.output
    assert "read at each word's first piece" in result.output  # model.head.piece, the default
    record = json.loads((trained / "eval_test.json").read_text())
    assert 0 <= record["accuracy"] <= 1 and record["tokens"] == 4 and record["sentences"] == 1
    assert record["baseline_accuracy"] == 0.5  # the→DT, cats→NNS right; can→MD, swims→NNS (unknown) wrong
    known, unknown = record["known"], record["unknown"]  # the, can, cats; swims
    assert (known["words"], unknown["words"]) == (3, 1)
    assert known["baseline_accuracy"] == pytest.approx(2 / 3) and unknown["baseline_accuracy"] == 0.0
    # the decoded tags, split by group, add up to the accuracy that scoring the head gives
    assert 3 * known["accuracy"] + unknown["accuracy"] == pytest.approx(4 * record["accuracy"])
    assert "known words" in result.output and "unknown words" in result.output


def test_an_unknown_tag_at_evaluation_is_one_line(trained: Path) -> None:
    (trained.parent / "test.tags").write_text("DT NN XX NNS\n")
    try:
        result = runner.invoke(app, ["evaluate", str(trained), "--split", "test"])
    finally:
        (trained.parent / "test.tags").write_text(TEST[1])
    assert result.exit_code == 2
    assert f"{trained.parent}/test.tags line 1: tag 'XX' is not one of the model's 6 labels" in result.output


def test_decode_prints_one_line_of_tags_per_input_line(trained: Path) -> None:
    result = runner.invoke(app, ["decode", str(trained)], input="the can rusts\n\nyou can swim fast\n")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [len(line.split()) for line in lines] == [3, 0, 4]
    labels = {"DT", "MD", "NN", "NNS", "PRP", "VBZ"}
    assert all(tag in labels for line in lines for tag in line.split())


def test_inspect_shows_the_head_and_export_refuses(trained: Path) -> None:
    result = runner.invoke(app, ["inspect", str(trained)])
    assert result.exit_code == 0, result.output
    assert "output head" in result.output and "6 labels" in result.output
    refused = runner.invoke(app, ["export", str(trained), "--to", "ctranslate2", "-o", str(trained / "x")])
    assert refused.exit_code == 2
    assert "cannot export an encoder_only model to ctranslate2" in refused.output and "Traceback" not in refused.output


def test_piece_last_trains_decodes_and_evaluates_at_each_words_last_piece(trained: Path, tmp_path: Path) -> None:
    """model.head.piece: last end to end: the fitted spec keeps it (and its own architecture hash), and
    evaluate's accuracy is the share of decode's tags that match the gold tags (both read the last piece)."""
    from tbuild.builder import load_spec

    spec = yaml.safe_load((trained.parent / "tagger.yaml").read_text())
    spec["model"]["head"]["piece"] = "last"
    spec["train"]["max_steps"] = 2
    spec["output_dir"] = str(tmp_path / "run")
    (tmp_path / "last.yaml").write_text(yaml.safe_dump(spec))
    assert runner.invoke(app, ["train", str(tmp_path / "last.yaml")]).exit_code == 0
    run = tmp_path / "run"
    fitted = load_spec(run / "spec.yaml").spec
    assert fitted.model.head.piece == "last"  # type: ignore[union-attr]
    assert fitted.architecture_hash() != load_spec(trained / "spec.yaml").spec.architecture_hash()
    result = runner.invoke(app, ["evaluate", str(run), "--split", "test"])
    assert result.exit_code == 0, result.output
    decoded = runner.invoke(app, ["decode", str(run)], input=TEST[0])
    assert decoded.exit_code == 0, decoded.output
    tags = decoded.stdout.split()
    assert len(tags) == 4
    right = sum(a == b for a, b in zip(tags, TEST[1].split(), strict=True))
    assert json.loads((run / "eval_test.json").read_text())["accuracy"] == right / 4


def test_a_tune_study_scores_a_tagger_trial_by_its_validation_accuracy(trained: Path, tmp_path: Path) -> None:
    """objective {metric: accuracy} (specs/tune/pos-tagger.yaml's): a finished trial's score is the validation
    accuracy tbuild evaluate reports, kept in the run's eval_valid.json."""
    from tbuild.engine.run.directory import resolve_run
    from tbuild.engine.tune.spec import load_study
    from tbuild.engine.tune.trial import score

    study = tmp_path / "study.yaml"
    study.write_text(f"base: {trained.parent / 'tagger.yaml'}\nspace:\n  model.head.piece: {{choice: [first, last]}}\n"
                     "objective: {metric: accuracy}\nbudget: {trials: 2, trial_steps: 2}\n")
    value = score(resolve_run(trained), load_study(study))
    assert 0 <= value <= 1 and value == json.loads((trained / "eval_valid.json").read_text())["accuracy"]
    result = runner.invoke(app, ["evaluate", str(trained), "--split", "valid"])
    assert result.exit_code == 0, result.output
    assert json.loads((trained / "eval_valid.json").read_text())["accuracy"] == value


def test_dry_run_on_a_trained_tagger_sees_its_labels_as_unchanged(trained: Path) -> None:
    """The run's spec.yaml holds the fitted tag list and the spec says from_data: the same spec again is no
    change (it resumes), and a real change (word dropout) is named alone."""
    spec = str(trained.parent / "tagger.yaml")
    same = runner.invoke(app, ["train", spec, "--dry-run"])
    assert same.exit_code == 0 and "nothing changed since its last call" in same.output, same.output
    changed = runner.invoke(app, ["train", spec, "--set", "model.dropout.token=0.2", "--dry-run"])
    assert changed.exit_code == 2 and "model.dropout.token: 0.0 → 0.2" in changed.output, changed.output
    assert "model.head.labels" not in changed.output

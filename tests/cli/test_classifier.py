"""A sequence classifier (model.kind encoder_only, a sequence_classification head) end to end through the
CLI on toy LABEL<TAB>TEXT files: train a few steps, evaluate (accuracy, the majority baseline by hand, the
confusion table on the terminal and in eval_SPLIT.json), decode (one label per input line), and the
one-line refusals (a bad line, an unknown label, a labelled line to decode, commands that do not apply)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app

runner = CliRunner()

TRAIN = ("en\tthe dog runs\nde\tder Hund rennt\nfr\tle chien court\nen\ta man sits\nde\tein Mann sitzt\n"
         "fr\tun homme assis\nen\tthe man runs\n")
TEST = "de\tder Mann rennt\nen\tthe dog sits\nfr\tle chien assis\nen\ta dog\n"


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run directory of a tiny classifier trained 3 steps on the toy files."""
    root = tmp_path_factory.mktemp("classifier")
    for split, text in (("train", TRAIN), ("valid", TRAIN), ("test", TEST)):
        (root / f"{split}.tsv").write_text(text)
    spec = {"model": {"kind": "encoder_only", "d_model": 16, "encoder": {"layers": 1, "heads": 2, "d_ff": 32},
                      "head": {"kind": "sequence_classification"}},
            "data": {"dataset": {"kind": "classification", "source": "files"}, "train": str(root / "train.tsv"),
                     "valid": str(root / "valid.tsv"), "test": str(root / "test.tsv"),
                     "tokenizer": {"vocab_size": 40}},
            "train": {"max_steps": 3, "validate_every": 2, "log_every": 1, "threads": 1, "precision": "fp32",
                      "select": {"metric": "accuracy"}},
            "output_dir": str(root / "run")}
    (root / "classifier.yaml").write_text(yaml.safe_dump(spec))
    result = runner.invoke(app, ["train", str(root / "classifier.yaml")])
    assert result.exit_code == 0, result.output
    assert "model.head.labels: 3 labels" in result.output and "accuracy" in result.output
    fitted = yaml.safe_load((root / "run" / "spec.yaml").read_text())
    assert fitted["model"]["head"]["labels"] == ["de", "en", "fr"]
    return root / "run"


def test_evaluate_reports_accuracy_the_baseline_and_the_confusion_table(trained: Path) -> None:
    result = runner.invoke(app, ["evaluate", str(trained), "--split", "test"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "accuracy" in result.output and "baseline" in result.output and "Confusion" in result.output
    record = json.loads((trained / "eval_test.json").read_text())
    assert record["sentences"] == 4 and record["baseline_accuracy"] == 0.5  # "en" (3 of 7 in train): 2 of 4
    table = record["confusion"]
    assert list(table) == ["de", "en", "fr"] and all(list(row) == ["de", "en", "fr"] for row in table.values())
    assert {g: sum(row.values()) for g, row in table.items()} == {"de": 1, "en": 2, "fr": 1}
    assert record["accuracy"] == sum(table[g][g] for g in table) / 4


def test_decode_prints_one_label_per_input_line(trained: Path) -> None:
    result = runner.invoke(app, ["decode", str(trained)], input="the dog runs\n\nun chien\nder Hund\n")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 4 and lines[1] == "" and all(x in {"de", "en", "fr"} for x in lines[:1] + lines[2:])


def test_bad_input_is_one_line_with_exit_2(trained: Path) -> None:
    test = trained.parent / "test.tsv"
    for text, message in (("de\tder Mann\nit\til cane\n", f"{test} line 2: label 'it' is not one of the model's "
                           "3 labels"), ("de\tder Mann\nen the dog\n", f"{test} line 2: no tab")):
        test.write_text(text)
        try:
            result = runner.invoke(app, ["evaluate", str(trained), "--split", "test"])
        finally:
            test.write_text(TEST)
        assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output
    result = runner.invoke(app, ["decode", str(trained)], input="the dog\nen\tthe dog\n")
    assert result.exit_code == 2 and "line 2 holds a tab: tbuild decode classifies text alone" in result.output


def test_commands_that_do_not_apply_refuse_in_one_line(trained: Path) -> None:
    result = runner.invoke(app, ["generate", str(trained)], input="the dog\n")
    assert result.exit_code == 2
    assert "generate of encoder_only is not supported yet" in result.output and "Traceback" not in result.output
    result = runner.invoke(app, ["evaluate", str(trained), "--src", "a", "--ref", "b"])
    assert result.exit_code == 2
    assert "a classifier is evaluated on a split of its data (no --src/--ref)" in result.output
    result = runner.invoke(app, ["data", "prepare", str(trained.parent / "classifier.yaml")])
    assert result.exit_code == 2 and "is a tagger or classifier (model.kind encoder_only)" in result.output


def test_an_ensemble_of_a_classifier_with_itself_is_the_classifier(trained: Path) -> None:
    """Classifiers ensemble as taggers do (tests/cli/test_tagger_ensemble.py): the run with itself is the run."""
    alone = runner.invoke(app, ["evaluate", str(trained), "--split", "valid"])
    assert alone.exit_code == 0, alone.output
    single = json.loads((trained / "eval_valid.json").read_text())
    twice = runner.invoke(app, ["evaluate", str(trained), str(trained), "--split", "valid", "--combine", "prob"])
    assert twice.exit_code == 0 and "ensemble of 2 models" in twice.output, twice.output
    record = json.loads((trained / "eval_valid.json").read_text())
    assert record["accuracy"] == single["accuracy"] and record["nll"] == pytest.approx(single["nll"], rel=1e-5)


def test_evaluate_against_compares_line_accuracy(trained: Path, tmp_path: Path) -> None:
    """--against with a classifier: the accuracy over lines compared; the same model on both sides: no
    difference, p = 1 (not sacreBLEU's 1/(N+1))."""
    import shutil

    other = tmp_path / "other"
    shutil.copytree(trained, other)
    result = runner.invoke(app, ["evaluate", str(trained), "--split", "test", "--against", str(other),
                                 "--bootstrap", "100"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    record = json.loads((trained / "eval_test.json").read_text())
    found = record["comparison"]["metrics"]["accuracy"]
    assert found["score"] == found["against_score"] == pytest.approx(100 * record["accuracy"])
    assert (found["difference"], found["p_value"], record["comparison"]["sentences"]) == (0, 1.0, 4)
    kept = (trained / "eval_test.out").read_text().splitlines()
    assert len(kept) == 4 and set(kept) <= {"de", "en", "fr"}

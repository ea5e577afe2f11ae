"""A tiny parsing spec trained a few steps from the mirror's treebank sample, then decoded and scored
through the CLI (§6.3: trees out, EVALB in)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.engine.data.trees import read_trees
from tbuild.engine.tasks.parsing.diagnosis import spans
from tbuild.engine.tasks.parsing.evalb import evalb, read_lines

runner = CliRunner()


@pytest.fixture(scope="module")
def parsing_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    mirror = os.environ.get("TBUILD_DATA_MIRROR")
    if not mirror or not (Path(mirror) / "treebank-sample" / "treebank.zip").is_file():
        pytest.skip("the NLTK treebank sample is not in $TBUILD_DATA_MIRROR")
    root = tmp_path_factory.mktemp("parsing")
    spec = {
        "output_dir": str(root / "run"),
        "model": {"d_model": 32, "encoder": {"layers": 1, "heads": 2, "d_ff": 64},
                  "decoder": {"layers": 1, "heads": 2, "d_ff": 64}},
        "data": {"dataset": "treebank", "target_lang": "parse", "train": str(root / "data" / "train"),
                 "valid": str(root / "data" / "valid"), "test": str(root / "data" / "test"),
                 "tokenizer": {"vocab_size": 400, "max_sentences": 1000}, "max_length": 128},
        "train": {"batch_tokens": 800, "max_steps": 2, "log_every": 1, "validate_every": 2, "checkpoint_every": 2,
                  "checkpoint_minutes": None, "precision": "fp32",
                  "schedule": {"kind": "inverse_sqrt", "lr": 1e-3, "warmup": 2}},
        "decode": {"beam": 2, "alpha": 0.3, "max_len_a": 1.0, "max_len_b": 8},
    }
    (root / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = runner.invoke(app, ["train", str(root / "spec.yaml")])
    assert result.exit_code == 0, result.output
    assert "target tokens kept whole" in result.output
    return root / "run"


def test_decode_writes_one_tree_per_line_over_the_input_words(parsing_run: Path) -> None:
    text = "The cat sat .\n\nIt ( purred ) .\n"
    result = runner.invoke(app, ["decode", str(parsing_run)], input=text)
    assert result.exit_code == 0, result.output
    lines = result.stdout.split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == ""
    assert read_trees(lines[0], "out")[0].words() == ["The", "cat", "sat", "."]
    assert read_trees(lines[2], "out")[0].words() == ["It", "-LRB-", "purred", "-RRB-", "."]
    assert lines[0].startswith("(TOP ") and "outputs repaired into trees" in result.stderr
    nbest = runner.invoke(app, ["decode", str(parsing_run), "--nbest", "2"], input="The cat sat .\n")
    assert [r.split(" ||| ")[0] for r in nbest.stdout.splitlines()] == ["0", "0"]


def test_evaluate_reports_evalb(parsing_run: Path, tmp_path: Path) -> None:
    data = parsing_run.parent / "data"
    (tmp_path / "src").write_text("".join(read_lines(data / "valid.en")[:6][i] + "\n" for i in range(6)))
    (tmp_path / "ref").write_text("".join(line + "\n" for line in read_lines(data / "valid.gold")[:6]))
    result = runner.invoke(app, ["evaluate", str(parsing_run), "--src", str(tmp_path / "src"),
                                 "--ref", str(tmp_path / "ref"), "--show", "1"])
    assert result.exit_code == 0, result.output
    assert "Bracketing F1" in result.output and "EVALB COLLINS.prm" in result.output
    assert "outputs repaired into trees" in result.output
    report = json.loads((parsing_run / "eval_src.json").read_text())
    trees = read_lines(parsing_run / "eval_src.trees")
    again = evalb(read_lines(tmp_path / "ref"), trees)
    assert report["all"]["f1"] == again.all.to_json()["f1"] and report["all"]["error_sentences"] == 0
    # well-formed decoding (the default): every output is a tree over its words, nothing to repair
    assert report["all"]["sentences"] == 6 and report["repairs"]["outputs"] == 6
    assert report["repairs"]["repaired"] == 0 and "0 of 6 outputs repaired" in result.output
    assert (parsing_run / "eval_src.evalb").read_text() == again.report()
    free = runner.invoke(app, ["evaluate", str(parsing_run), "--src", str(tmp_path / "src"), "--ref",
                               str(tmp_path / "ref"), "--set", "data.dataset.well_formed=false"])
    assert free.exit_code == 0, free.output
    assert json.loads((parsing_run / "eval_src.json").read_text())["repairs"]["repaired"] > 0  # 2 steps trained
    bad = runner.invoke(app, ["evaluate", str(parsing_run), "--src", str(tmp_path / "src"), "--ref",
                              str(data / "valid.gold")])
    assert bad.exit_code == 2 and "6 source lines but 273 gold trees" in bad.output


def test_evaluate_diagnose_writes_where_the_points_go(parsing_run: Path, tmp_path: Path) -> None:
    data = parsing_run.parent / "data"
    (tmp_path / "src").write_text("".join(line + "\n" for line in read_lines(data / "valid.en")[:5]))
    (tmp_path / "ref").write_text("".join(line + "\n" for line in read_lines(data / "valid.gold")[:5]))
    result = runner.invoke(app, ["evaluate", str(parsing_run), "--src", str(tmp_path / "src"), "--ref",
                                 str(tmp_path / "ref"), "--diagnose"])
    assert result.exit_code == 0, result.output
    assert "F1 by sentence length" in result.output and "right-branching floor" in result.output
    found = json.loads((parsing_run / "eval_src.diagnosis.json").read_text())
    assert sum(b["sentences"] for b in found["by_length"]) == 5
    empty = [b for b in found["by_length"] if b["sentences"] == 0]
    assert empty and all(b["f1"] is None and b["complete_match"] is None for b in empty)
    outputs = [read_trees(line, "out")[0] for line in read_lines(parsing_run / "eval_src.trees")]
    assert sum(found["spans"].values()) == sum(len(spans(t)) for t in outputs)
    assert set(found["token_accuracy"]) == {"open", "close", "leaf", "eos"}
    assert found["token_accuracy"]["eos"]["tokens"] == 5


def test_evaluate_against_compares_bracketing_f1(parsing_run: Path, tmp_path: Path) -> None:
    """--against with a parser: EVALB's F1 of the kept trees (eval_src.trees, the ones the record scored) against
    a copy of the run's (the same trees: no difference, p = 1), as resampled from those files."""
    import shutil

    from tbuild.engine.significance import paired_bootstrap
    from tbuild.engine.tasks.parsing.evaluation import f1_measure

    data = parsing_run.parent / "data"
    (tmp_path / "src").write_text("".join(line + "\n" for line in read_lines(data / "valid.en")[:8]))
    (tmp_path / "ref").write_text("".join(line + "\n" for line in read_lines(data / "valid.gold")[:8]))
    other = tmp_path / "other"
    shutil.copytree(parsing_run, other)
    result = runner.invoke(app, ["evaluate", str(parsing_run), "--src", str(tmp_path / "src"), "--ref",
                                 str(tmp_path / "ref"), "--against", str(other), "--show", "0"],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    record = json.loads((parsing_run / "eval_src.json").read_text())
    found = record["comparison"]["metrics"]["F1"]
    assert found["score"] == pytest.approx(record["all"]["f1"]) and record["comparison"]["sentences"] == 8
    assert (found["difference"], found["p_value"]) == (0, 1.0)
    measure = f1_measure(read_lines(tmp_path / "ref"))
    ours, theirs = (measure.statistics(read_lines(run / "eval_src.trees")) for run in (parsing_run, other))
    assert paired_bootstrap(measure, [ours], [theirs]).to_json() == found

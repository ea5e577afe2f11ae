"""Lexicalized trees end to end (``data.dataset.linearization: words``, in order): a tiny parser trained a
few steps from the mirror's treebank sample writes the words into its targets, keeps only the brackets
whole in the shared vocabulary, then decodes and scores through the CLI with every output a tree over
exactly its input words."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.engine.data.trees import read_trees
from tbuild.engine.tasks.parsing.evalb import read_lines

runner = CliRunner()


@pytest.fixture(scope="module")
def words_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    mirror = os.environ.get("TBUILD_DATA_MIRROR")
    if not mirror or not (Path(mirror) / "treebank-sample" / "treebank.zip").is_file():
        pytest.skip("the NLTK treebank sample is not in $TBUILD_DATA_MIRROR")
    root = tmp_path_factory.mktemp("parsing-words")
    spec = {
        "output_dir": str(root / "run"),
        "model": {"d_model": 32, "encoder": {"layers": 1, "heads": 2, "d_ff": 64},
                  "decoder": {"layers": 1, "heads": 2, "d_ff": 64}},
        "data": {"dataset": {"kind": "treebank", "linearization": "words", "order": "in_order"},
                 "target_lang": "parse", "train": str(root / "data" / "train"),
                 "valid": str(root / "data" / "valid"), "test": str(root / "data" / "test"),
                 "tokenizer": {"vocab_size": 400, "max_sentences": 1000}, "max_length": 256},
        "train": {"batch_tokens": 1200, "max_steps": 2, "log_every": 1, "validate_every": 2, "checkpoint_every": 2,
                  "checkpoint_minutes": None, "precision": "fp32",
                  "schedule": {"kind": "inverse_sqrt", "lr": 1e-3, "warmup": 2}},
        "decode": {"beam": 2, "alpha": 0.3, "max_len_a": 1.0, "max_len_b": 30},
    }
    (root / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = runner.invoke(app, ["train", str(root / "spec.yaml")])
    assert result.exit_code == 0, result.output
    assert "target tokens kept whole" in result.output
    return root / "run"


def test_the_targets_hold_the_words_and_only_brackets_are_whole(words_run: Path) -> None:
    data = words_run.parent / "data"
    source, target = read_lines(data / "train.en")[0].split(), read_lines(data / "train.parse")[0].split()
    assert [t for t in target if not t.startswith(("(", ")"))] == source and not target[0].startswith("(")
    from sentencepiece import SentencePieceProcessor

    sp = SentencePieceProcessor(model_file=str(words_run / "spm.model"))
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    assert "\u2581(S" in pieces and "\u2581)NP" in pieces and "\u2581XX" not in pieces
    assert len(sp.encode(" ".join(source))) > len(source)  # words in subword pieces, as the source


def test_evaluate_and_decode_give_trees_over_the_words(words_run: Path, tmp_path: Path) -> None:
    data = words_run.parent / "data"
    (tmp_path / "src").write_text("".join(line + "\n" for line in read_lines(data / "valid.en")[:6]))
    (tmp_path / "ref").write_text("".join(line + "\n" for line in read_lines(data / "valid.gold")[:6]))
    result = runner.invoke(app, ["evaluate", str(words_run), "--src", str(tmp_path / "src"),
                                 "--ref", str(tmp_path / "ref")])
    assert result.exit_code == 0, result.output
    report = json.loads((words_run / "eval_src.json").read_text())
    assert report["all"]["sentences"] == 6 and report["all"]["error_sentences"] == 0
    assert report["repairs"]["outputs"] == 6 and report["repairs"]["repaired"] == 0  # well-formed: copied words
    trees = read_lines(words_run / "eval_src.trees")
    gold = read_lines(tmp_path / "ref")
    assert [read_trees(t, "out")[0].words() for t in trees] == [read_trees(g, "gold")[0].words() for g in gold]
    text = "Ms. Haag plays Elianti .\nIt ( purred ) zyzzyvas .\n"
    decoded = runner.invoke(app, ["decode", str(words_run)], input=text)
    assert decoded.exit_code == 0, decoded.output
    lines = decoded.stdout.split("\n")
    assert read_trees(lines[0], "out")[0].words() == ["Ms.", "Haag", "plays", "Elianti", "."]
    assert read_trees(lines[1], "out")[0].words() == ["It", "-LRB-", "purred", "-RRB-", "zyzzyvas", "."]
    assert "0 of 2 outputs repaired into trees" in decoded.stderr

"""A parser with a pointer into the source (``model.decoder.pointer: {kind: next_word}``) end to end: a tiny
one trained 2 steps from the mirror's treebank sample through the CLI resolves its leaf token and the
source's word-first pieces into the run's spec, decodes and scores well-formed trees, shows the pointer in
``inspect`` and is refused by export in one line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.components.specs.pointer import parse_ids
from tbuild.engine.data.trees import read_trees
from tbuild.engine.tasks.parsing.evalb import read_lines

runner = CliRunner()


@pytest.fixture(scope="module")
def pointer_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    mirror = os.environ.get("TBUILD_DATA_MIRROR")
    if not mirror or not (Path(mirror) / "treebank-sample" / "treebank.zip").is_file():
        pytest.skip("the NLTK treebank sample is not in $TBUILD_DATA_MIRROR")
    root = tmp_path_factory.mktemp("parsing-pointer")
    spec = {
        "output_dir": str(root / "run"),
        "model": {"d_model": 32, "encoder": {"layers": 1, "heads": 2, "d_ff": 64},
                  "decoder": {"layers": 1, "heads": 2, "d_ff": 64, "pointer": {"kind": "next_word"}}},
        "data": {"dataset": {"kind": "treebank"}, "target_lang": "parse", "train": str(root / "data" / "train"),
                 "valid": str(root / "data" / "valid"), "test": str(root / "data" / "test"),
                 "tokenizer": {"vocab_size": 400, "max_sentences": 1000}, "max_length": 256},
        "train": {"batch_tokens": 1200, "max_steps": 3, "log_every": 1, "validate_every": 3, "checkpoint_every": 3,
                  "checkpoint_minutes": None, "precision": "fp32",
                  "schedule": {"kind": "inverse_sqrt", "lr": 1e-3, "warmup": 2}},
        "decode": {"beam": 3, "alpha": 0.3, "max_len_a": 1.0, "max_len_b": 30},
    }
    (root / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = runner.invoke(app, ["train", str(root / "spec.yaml")])
    assert result.exit_code == 0, result.output
    return root / "run"


def test_the_run_spec_holds_the_resolved_ids(pointer_run: Path) -> None:
    from sentencepiece import SentencePieceProcessor

    pointer = yaml.safe_load((pointer_run / "spec.yaml").read_text())["model"]["decoder"]["pointer"]
    sp = SentencePieceProcessor(model_file=str(pointer_run / "spm.model"))
    assert pointer["source"] == "words" and parse_ids(pointer["advance_ids"]) == [sp.piece_to_id("\u2581XX")]
    starts = set(parse_ids(pointer["unit_ids"]))
    words = read_lines(pointer_run.parent / "data" / "train.en")[0].split()
    firsts = [sp.encode(w)[0] for w in words]
    assert all(i in starts for i in firsts)  # each word's first piece begins a unit
    rest = [i for w in words for i in sp.encode(w)[1:]]
    assert rest and not any(i in starts for i in rest)  # a word's other pieces do not


def test_evaluate_and_decode_give_well_formed_trees(pointer_run: Path, tmp_path: Path) -> None:
    data = pointer_run.parent / "data"
    (tmp_path / "src").write_text("".join(line + "\n" for line in read_lines(data / "valid.en")[:5]))
    (tmp_path / "ref").write_text("".join(line + "\n" for line in read_lines(data / "valid.gold")[:5]))
    result = runner.invoke(app, ["evaluate", str(pointer_run), "--src", str(tmp_path / "src"),
                                 "--ref", str(tmp_path / "ref")])
    assert result.exit_code == 0, result.output
    report = json.loads((pointer_run / "eval_src.json").read_text())
    assert report["all"]["sentences"] == 5 and report["all"]["error_sentences"] == 0
    assert report["repairs"]["repaired"] == 0  # well-formed decoding: every output a tree over its words
    decoded = runner.invoke(app, ["decode", str(pointer_run)], input="Ms. Haag plays Elianti .\n")
    assert decoded.exit_code == 0, decoded.output
    tree = read_trees(decoded.stdout.split("\n")[0], "out")[0]
    assert tree.words() == ["Ms.", "Haag", "plays", "Elianti", "."]


def test_inspect_shows_the_pointer_and_export_refuses_it(pointer_run: Path, tmp_path: Path) -> None:
    shown = runner.invoke(app, ["inspect", str(pointer_run)], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    row = next(line for line in shown.stdout.splitlines() if "decoder pointer" in line)
    assert "next_word" in row and "1,024" in row  # 32 × 32, no bias
    refused = runner.invoke(app, ["export", str(pointer_run), "--check", "none", "-o", str(tmp_path / "ct2")])
    assert refused.exit_code == 2 and not (tmp_path / "ct2").exists()
    assert refused.output.strip().startswith("error: cannot export to ctranslate2: model.decoder.pointer (next_word)")
    assert len(refused.output.strip().splitlines()) == 1

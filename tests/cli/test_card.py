"""`tbuild card`: the tiny run's model card names its spec, its scores with their sacreBLEU
signatures, its lineage and its architecture (`export --to hf` writing it: tests/cli/test_export_hf.py)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tbuild.cli.app import app

runner = CliRunner()


@pytest.fixture
def run(tiny_run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(tiny_run, copy, ignore=shutil.ignore_patterns("eval_*.json", "export"))
    return copy


def test_the_card_says_what_the_run_is_and_scored(run: Path, tmp_path: Path) -> None:
    before = runner.invoke(app, ["card", str(run)])
    assert before.exit_code == 0, before.output
    assert "Not evaluated yet" in before.stdout
    assert runner.invoke(app, ["evaluate", str(run), "--split", "test", "--show", "0"]).exit_code == 0
    lineage = {"from": "/runs/parent", "name": "parent", "step": 1200, "weights": "best.safetensors", "frozen": []}
    (run / "init.json").write_text(json.dumps(lineage))
    out = tmp_path / "README.md"
    result = runner.invoke(app, ["card", str(run), "-o", str(out)])
    assert result.exit_code == 0, result.output
    card = out.read_text()
    scores = json.loads((run / "eval_test.json").read_text())
    assert scores["bleu_signature"] in card and f"{scores['bleu']:.2f}" in card
    assert card.startswith("---\nlanguage: [en, de]") and "```mermaid\nflowchart BT" in card
    assert "| `model.d_model` | `32` |" in card and "| `model.encoder.layers` | `1` |" in card
    assert "- steps: 30 " in card and "fine-tuned from `/runs/parent` (parent, step 1200" in card
    assert "Beam 3, length penalty" in card and "## Intended use and limits" in card
    assert "| train | " in card and "pairs)" in card  # the prepared split's size
    data_rows = [line for line in card.splitlines() if line.startswith(("| train |", "| valid |", "| test |"))]
    assert data_rows and not any("`/" in line for line in data_rows), data_rows  # relative to the run, no one's home
    facts = json.loads((run / "hardware.jsonl").read_text().splitlines()[0])  # written by the training call
    assert facts["cores"] >= 1 and facts["precision"].startswith("precision")
    assert f"- hardware: {facts['cpu']}" in card and f"{facts['threads']} threads, cpu; {facts['precision']}" in card


def test_a_tokenizers_file_is_named_as_such(run: Path) -> None:
    """A run whose tokenizer is a tokenizer.json (an imported translator's) is not called a sentencepiece model."""
    assert "| tokenizer | sentencepiece bpe, vocabulary 200" in runner.invoke(app, ["card", str(run)]).stdout
    (run / "spm.model").rename(run / "tokenizer.json")
    card = runner.invoke(app, ["card", str(run)])
    assert card.exit_code == 0, card.output
    digest = hashlib.sha256((run / "tokenizer.json").read_bytes()).hexdigest()[:16]
    assert f"| tokenizer | Hugging Face tokenizers file, vocabulary 200 (shared), sha256 `{digest}" in card.stdout

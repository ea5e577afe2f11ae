"""A masked LM (model.head masked_lm) end to end through the CLI on toy text: train a few steps (the masked
pieces' loss and validation perplexity), evaluate (masked perplexity and accuracy, the same on every call),
the commands that refuse it in one line, and a tagger started from it (train.init): its tokenizer, the
encoder's tensors equal to the masked LM's, its head new, a few steps trained."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app

runner = CliRunner()
ENV = {"COLUMNS": "200"}
WORDS = ["the", "a", "dog", "cat", "man", "runs", "walks", "sits", "on", "in", "red", "big", "park", "ball"]
LEX = {"the": "DT", "a": "DT", "dog": "NN", "cat": "NN", "man": "NN", "runs": "VBZ", "walks": "VBZ", "sits": "VBZ",
       "on": "IN", "in": "IN", "red": "JJ", "big": "JJ", "park": "NN", "ball": "NN"}
MODEL = {"kind": "encoder_only", "d_model": 16, "encoder": {"layers": 1, "heads": 2, "d_ff": 32},
         "norm_placement": "pre"}
TRAIN = {"max_steps": 3, "validate_every": 2, "log_every": 1, "threads": 1, "precision": "fp32", "batch_tokens": 400}


def sentences(n: int, seed: int) -> list[list[str]]:
    g = torch.Generator().manual_seed(seed)
    return [[WORDS[int(i)] for i in torch.randint(len(WORDS), (int(torch.randint(3, 9, (1,), generator=g)),),
                                                  generator=g)] for _ in range(n)]


@pytest.fixture(scope="module")
def mlm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run directory of a tiny masked LM trained 3 steps on toy text."""
    root = tmp_path_factory.mktemp("mlm")
    for split, n in (("train", 120), ("valid", 20), ("test", 20)):
        (root / f"{split}.txt").write_text("".join(" ".join(s) + "\n" for s in sentences(n, len(split))))
    spec = {"model": {**MODEL, "head": {"kind": "masked_lm"}},
            "data": {"dataset": "text", "train": str(root / "train.txt"), "valid": str(root / "valid.txt"),
                     "test": str(root / "test.txt"), "tokenizer": {"vocab_size": 30}, "masking": {"copies": 2}},
            "train": {**TRAIN, "label_smoothing": 0.0}, "output_dir": str(root / "run")}
    (root / "mlm.yaml").write_text(yaml.safe_dump(spec))
    result = runner.invoke(app, ["train", str(root / "mlm.yaml")], env=ENV)
    assert result.exit_code == 0, result.output
    assert "in 2 masked copies" in result.output and "240 training lines" in result.output
    assert "valid step 2" in result.output and "ppl" in result.output
    return root / "run"


def test_evaluate_reports_the_masked_perplexity_the_same_each_time(mlm: Path) -> None:
    first = runner.invoke(app, ["evaluate", str(mlm), "--split", "test"], env=ENV)
    assert first.exit_code == 0, first.output
    assert "masked perplexity" in first.output and "masked accuracy" in first.output
    record = json.loads((mlm / "eval_test.json").read_text())
    assert record["sentences"] == 20 and record["tokens"] >= 20 and 0 <= record["accuracy"] <= 1
    assert record["perplexity"] > 1
    again = runner.invoke(app, ["evaluate", str(mlm), "--split", "test"], env=ENV)
    assert again.exit_code == 0 and json.loads((mlm / "eval_test.json").read_text())["perplexity"] == \
        record["perplexity"]  # the masks come from the run's seed: the same figure


@pytest.mark.parametrize("command", [["decode"], ["generate"], ["export", "--to", "hf"], ["attention"], ["card"]])
def test_commands_without_a_masked_lm_path_refuse_it_in_one_line(mlm: Path, command: list[str],
                                                                 tmp_path: Path) -> None:
    args = [command[0], str(mlm), *command[1:]]
    if command[0] == "export":
        args += ["-o", str(tmp_path / "out")]
    if command[0] == "attention":
        args += ["--text", "the dog runs"]
    result = runner.invoke(app, args, input="the dog\n", env=ENV)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "masked" in lines[0], result.output


def test_a_tagger_starts_from_it(mlm: Path, tmp_path: Path) -> None:
    """The tagger takes the masked LM's tokenizer, loads its embeddings, encoder layer and final norm (equal to
    the masked LM's), starts its head new, and trains."""
    from tbuild.builder import build_model, load_spec
    from tbuild.engine.data.tokenizer import Tokenizer
    from tbuild.engine.finetune.plan import apply_plan, make_plan
    from tbuild.engine.finetune.source import load_source
    from tbuild.engine.run.checkpoint import read_checkpoint

    data = sentences(30, 7)
    for split in ("train", "valid"):
        (tmp_path / f"{split}.words").write_text("".join(" ".join(s) + "\n" for s in data))
        (tmp_path / f"{split}.tags").write_text("".join(" ".join(LEX[w] for w in s) + "\n" for s in data))
    spec = {"model": {**MODEL, "head": {"kind": "token_classification"}},
            "data": {"dataset": {"kind": "tagging", "source": "files"}, "train": str(tmp_path / "train"),
                     "valid": str(tmp_path / "valid"), "tokenizer": {"vocab_size": 30}},
            "train": {**TRAIN, "select": {"metric": "accuracy"}, "init": {"from": str(mlm)}},
            "output_dir": str(tmp_path / "run")}
    (tmp_path / "tagger.yaml").write_text(yaml.safe_dump(spec))
    result = runner.invoke(app, ["train", str(tmp_path / "tagger.yaml")], env=ENV)
    assert result.exit_code == 0, result.output
    assert "train.init's source's, copied" in result.output
    assert "head: the source's is a MaskedLM, this model's a TokenClassification: it starts new" in result.output
    assert (tmp_path / "run" / "spm.model").read_bytes() == (mlm / "spm.model").read_bytes()
    statuses = json.loads((tmp_path / "run" / "init.json").read_text())["tensors"]
    assert statuses["head.weight"] == statuses["head.bias"] == "new"
    assert {s for n, s in statuses.items() if not n.startswith("head.")} == {"loaded"}
    # the plan writes the masked LM's tensors themselves into the tagger
    fitted = load_spec(tmp_path / "run" / "spec.yaml").spec.model_copy()
    model = build_model(fitted)
    init = fitted.train.init
    assert init is not None
    source = load_source(init)
    apply_plan(make_plan(model, source, init, Tokenizer.load(tmp_path / "run" / "spm.model")), model)
    weights, _ = read_checkpoint(mlm / "best.safetensors")
    for name, tensor in model.state_dict().items():
        if not name.startswith("head."):
            assert torch.equal(tensor, weights[f"model.{name}"]), name

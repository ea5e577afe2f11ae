"""A decoder-only language model end to end through the CLI: train on a slice of text (and resume),
evaluate its perplexity, inspect it, generate greedily and with seeded sampling; the commands that need
a translator refuse it in one line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tests.conftest import tiny_train_spec

runner = CliRunner()


def lm_spec(corpus: Path, run: Path) -> dict:
    """A tiny LM on the German side of ``tiny_corpus`` (400 training lines) as plain text files."""
    spec = tiny_train_spec(corpus, run, max_steps=4, validate_every=2, checkpoint_every=2)
    spec["model"] = {"kind": "decoder_only", "d_model": 32, "decoder": {"layers": 2, "heads": 2, "d_ff": 64},
                     "positional": {"kind": "rope"}, "norm_placement": "pre", "max_positions": 64,
                     "tie_embeddings": "decoder"}
    spec["data"] = {"dataset": "text", "train": str(corpus / "train.de"), "valid": str(corpus / "val.de"),
                    "test": str(corpus / "test.de"), "tokenizer": {"vocab_size": 200}, "max_length": 60}
    spec["decode"] = {"beam": 1, "max_len_b": 8}
    return spec


def train_llama_like(corpus: Path, root: Path) -> Path:
    """A tiny Llama-like LM (RoPE, RMSNorm, SwiGLU, untied: what every export runtime holds) trained through
    the CLI into ROOT/run; returns the run."""
    spec = lm_spec(corpus, root / "run")
    spec["model"].update(ffn={"kind": "swiglu"}, norm={"kind": "rmsnorm"}, tie_embeddings="none")
    (root / "lm.yaml").write_text(yaml.safe_dump(spec))
    result = runner.invoke(app, ["train", str(root / "lm.yaml")])
    assert result.exit_code == 0, result.output
    return root / "run"


@pytest.fixture(scope="module")
def trained(tiny_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(spec file, run directory) of the tiny LM trained for 4 steps, then resumed to 6."""
    root = tmp_path_factory.mktemp("lm")
    spec, run = root / "lm.yaml", root / "run"
    spec.write_text(yaml.safe_dump(lm_spec(tiny_corpus, run)))
    first = runner.invoke(app, ["train", str(spec)])
    assert first.exit_code == 0, first.output
    assert "lines from" in first.output and (run / "best.safetensors").is_file()
    more = runner.invoke(app, ["train", str(spec), "--set", "train.max_steps=6"])
    assert more.exit_code == 0, more.output
    assert "resum" in more.output.lower()
    assert json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["step"] == 6
    return spec, run


def test_evaluate_reports_perplexity_only(trained: tuple[Path, Path]) -> None:
    _, run = trained
    result = runner.invoke(app, ["evaluate", str(run), "--split", "test"])
    assert result.exit_code == 0, result.output
    assert "perplexity" in result.output and "BLEU" not in result.output
    record = json.loads((run / "eval_test.json").read_text())
    assert record["sentences"] == 20 and record["tokens"] > 20
    assert 1 < record["perplexity"] < 1000 and math.isclose(math.log(record["perplexity"]), record["nll"],
                                                           rel_tol=1e-6)
    assert "bleu" not in record and "beam" not in record
    refused = runner.invoke(app, ["evaluate", str(run), "--src", "a", "--ref", "b"])
    assert refused.exit_code == 2 and "a language model is scored on a split" in refused.output


def test_inspect_counts_what_is_trained(trained: tuple[Path, Path]) -> None:
    from tbuild.engine.run.checkpoint import read_checkpoint

    _, run = trained
    result = runner.invoke(app, ["inspect", str(run), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    tensors, _ = read_checkpoint(run / "best.safetensors")
    unique = {t.data_ptr(): t.numel() for t in tensors.values()}  # the tied table is stored once
    assert report["total"] == sum(unique.values())
    assert report["rows"][0]["block"] == "token embedding"
    assert all(why is not None and "decoder_only" in why for why in report["export"].values())


def test_generate_greedy_and_seeded_samples(trained: tuple[Path, Path], tmp_path: Path) -> None:
    _, run = trained
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Ein Mann\n\n")
    greedy = runner.invoke(app, ["generate", str(run), "--input", str(prompts)])
    assert greedy.exit_code == 0, greedy.output
    lines = greedy.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("Ein Mann")  # each output: the prompt and its continuation
    assert runner.invoke(app, ["generate", str(run), "--input", str(prompts)]).stdout == greedy.stdout

    def sample(seed: int) -> str:
        result = runner.invoke(app, ["generate", str(run), "-i", str(prompts), "--sampling", "topk", "--topk", "50",
                                     "--seed", str(seed), "--nbest", "3", "--max-new-tokens", "12"])
        assert result.exit_code == 0, result.output
        return result.stdout

    first = sample(7)
    assert first == sample(7) and len(first.splitlines()) == 6  # 3 samples a prompt, `i ||| text ||| score`
    assert first != sample(8)
    jsonl = runner.invoke(app, ["generate", str(run), "--format", "jsonl", "--beam", "2"], input="Eine Frau\n")
    assert jsonl.exit_code == 0, jsonl.output
    record = json.loads(jsonl.stdout)
    assert record["source"] == "Eine Frau" and record["output"].startswith("Eine Frau")
    assert len(record["tokens"]) <= 2 + 8 + 1  # the prompt's pieces, at most decode.max_len_b more, EOS


@pytest.mark.parametrize("command", [["decode"], ["attention", "--text", "x"], ["card"]])
def test_a_translator_s_commands_refuse_a_language_model(trained: tuple[Path, Path], command: list[str]) -> None:
    _, run = trained  # (tbuild serve serves it at /generate: tests/engine/serving/test_kinds.py)
    result = runner.invoke(app, [command[0], str(run), *command[1:]], input="Ein Mann\n")
    assert result.exit_code == 2
    assert f"tbuild {command[0]} needs a translator (model.kind encoder_decoder)" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_export_refuses_what_no_causal_lm_class_computes(trained: tuple[Path, Path]) -> None:
    """The fixture's LM has RoPE with ReLU and LayerNorm: Llama's class has SwiGLU and RMSNorm, so each target
    refuses it in one line naming the fields (tests/cli/test_export_graphs.py exports the ones that fit)."""
    _, run = trained
    for target in ("ctranslate2", "hf"):
        result = runner.invoke(app, ["export", str(run), "--to", target])
        assert result.exit_code == 2, result.output
        assert f"cannot export a decoder_only model to {target}: model.positional rope" in result.output
        assert len(result.output.strip().splitlines()) == 1


def test_generate_refuses_a_translator(tiny_corpus: Path, tmp_path: Path) -> None:
    spec = tmp_path / "mt.yaml"
    spec.write_text(yaml.safe_dump(tiny_train_spec(tiny_corpus, tmp_path / "run")))
    result = runner.invoke(app, ["generate", str(spec)], input="x\n")
    assert result.exit_code == 2 and "is an encoder_decoder translator: use tbuild decode" in result.output

"""A tagger with model.char_input through the CLI: it trains, its checkpoint carries the spelling of its
tokenizer's pieces, it evaluates, and export refuses it in one line."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.engine.data.tokenizer import Tokenizer
from tbuild.engine.run.checkpoint import read_checkpoint


def test_a_tiny_tagger_with_chars_trains_from_the_cli_and_saves_its_spelling(tmp_path: Path) -> None:
    runner = CliRunner()
    for split in ("train", "valid", "test"):
        (tmp_path / f"{split}.words").write_text("cats dogs birds\nthe can rusts\nyou can can\n")
        (tmp_path / f"{split}.tags").write_text("NNS NNS NNS\nDT NN VBZ\nPRP MD MD\n")
    spec = {"model": {"kind": "encoder_only", "d_model": 16, "encoder": {"layers": 1, "heads": 2, "d_ff": 32},
                      "head": {"kind": "token_classification"}, "char_input": {"kind": "char_cnn", "filters": 8}},
            "data": {"dataset": {"kind": "tagging", "source": "files"}, "train": str(tmp_path / "train"),
                     "valid": str(tmp_path / "valid"), "test": str(tmp_path / "test"), "tokenizer": {"vocab_size": 30}},
            "train": {"max_steps": 3, "validate_every": 2, "log_every": 1, "threads": 1, "precision": "fp32",
                      "select": {"metric": "accuracy"}},
            "output_dir": str(tmp_path / "run")}
    (tmp_path / "tagger.yaml").write_text(yaml.safe_dump(spec))
    result = runner.invoke(app, ["train", str(tmp_path / "tagger.yaml")])
    assert result.exit_code == 0, result.output
    tensors, _ = read_checkpoint(tmp_path / "run" / "best.safetensors")
    spelling = tensors["model.src_embed.chars.spelling"]
    tok = Tokenizer.load(tmp_path / "run" / "spm.model")
    piece = next(i for i in range(tok.vocab_size) if tok.sp.id_to_piece(i) == "▁can")
    assert spelling[piece].tolist()[:6] == [b + 1 for b in "▁can".encode()] and spelling[:4].sum() == 0
    evaluated = runner.invoke(app, ["evaluate", str(tmp_path / "run"), "--split", "test"])
    assert evaluated.exit_code == 0, evaluated.output
    refused = runner.invoke(app, ["export", str(tmp_path / "run"), "--to", "hf", "-o", str(tmp_path / "hf")])
    assert refused.exit_code != 0 and "model.char_input (char_cnn)" in refused.output

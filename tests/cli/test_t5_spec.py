"""A spec with T5's layers (specs/examples/t5.yaml: the bucketed relative position bias, unscaled attention, no
biases, geglu) validates, inspects, trains, decodes and exports to T5ForConditionalGeneration from the CLI like any
other."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tests.conftest import REPO, tiny_train_spec

T5_MODEL = {"positional": {"kind": "bucketed", "buckets": 8, "max_distance": 16}, "norm": {"kind": "rmsnorm"},
            "norm_placement": "pre", "scale_embeddings": False, "ffn": {"kind": "geglu"},
            "attention": {"kind": "multihead", "bias": False, "scaled": False},
            "cross_attention": {"kind": "multihead", "bias": False, "scaled": False}}


def test_the_example_validates_and_inspects() -> None:
    runner = CliRunner()
    example = str(REPO / "specs" / "examples" / "t5.yaml")
    validated = runner.invoke(app, ["validate", example])
    assert validated.exit_code == 0, validated.output
    inspected = runner.invoke(app, ["inspect", example])
    assert inspected.exit_code == 0 and "bucketed" in inspected.output, inspected.output


def test_a_tiny_t5_trains_decodes_and_exports(tiny_corpus: Path, tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    runner = CliRunner()
    spec = tiny_train_spec(tiny_corpus, tmp_path / "run", max_steps=4, validate_every=4, checkpoint_every=4)
    spec["model"] |= T5_MODEL
    spec["data"]["tokenizer"] = spec["data"].get("tokenizer", {}) | {"kind": "unigram"}  # T5's spiece.model's kind
    (tmp_path / "t5.yaml").write_text(yaml.safe_dump(spec))
    trained = runner.invoke(app, ["train", str(tmp_path / "t5.yaml")])
    assert trained.exit_code == 0, trained.output
    decoded = runner.invoke(app, ["decode", str(tmp_path / "run"), "--beam", "2", "--device", "cpu"],
                            input="A man is riding a bike.\nTwo dogs play.\n")
    assert decoded.exit_code == 0, decoded.output
    exported = runner.invoke(app, ["export", str(tmp_path / "run"), "--to", "hf", "-o", str(tmp_path / "hf")])
    assert exported.exit_code == 0, exported.output
    config = yaml.safe_load((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["T5ForConditionalGeneration"] and config["feed_forward_proj"] == "gated-gelu"

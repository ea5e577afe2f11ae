"""A decoder-only translator (model.prefix_lm) end to end through the CLI on a Multi30k slice: train a
few steps, decode (target only), evaluate the test split (BLEU and chrF, as an encoder-decoder's);
loss both trains too; the commands it does not take refuse it in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tests.conftest import tiny_train_spec

runner = CliRunner()


def prefix_lm_spec(corpus: Path, run: Path, loss: str = "target") -> dict:
    """A tiny prefix LM on ``tiny_corpus``'s en→de pairs (one shared 200-piece vocabulary)."""
    spec = tiny_train_spec(corpus, run, max_steps=4, validate_every=2, checkpoint_every=2)
    spec["model"] = {"kind": "decoder_only", "prefix_lm": {"attention": "prefix", "loss": loss}, "d_model": 32,
                     "decoder": {"layers": 2, "heads": 2, "d_ff": 64}, "norm_placement": "pre",
                     "tie_embeddings": "three_way"}
    spec["decode"] = {"beam": 2, "max_len_a": 1.0, "max_len_b": 5}
    return spec


@pytest.fixture(scope="module")
def trained(tiny_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("prefix-lm")
    spec, run = root / "plm.yaml", root / "run"
    spec.write_text(yaml.safe_dump(prefix_lm_spec(tiny_corpus, run)))
    result = runner.invoke(app, ["train", str(spec)])
    assert result.exit_code == 0, result.output
    assert "pairs from" in result.output and (run / "best.safetensors").is_file()
    return run


def test_decode_gives_one_target_line_per_source(trained: Path, tmp_path: Path) -> None:
    source = tmp_path / "in.en"
    source.write_text("A man is walking.\n\nTwo dogs play in the snow.\n")
    result = runner.invoke(app, ["decode", str(trained), "--input", str(source), "--beam", "1"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.rstrip("\n").split("\n")
    assert len(lines) == 3 and lines[1] == ""


def test_lines_of_different_lengths_in_one_batch_decode_as_each_alone(trained: Path, tmp_path: Path) -> None:
    """``tbuild decode`` puts sources of different lengths in one batch (left-padded prefixes): each line's
    n-best outputs and scores are those of decoding it alone."""
    lines = ["A man is walking.", "Dogs.", "Two dogs play in the snow near a big red house."]

    def decoded(text: list[str], name: str) -> list[dict]:
        source = tmp_path / name
        source.write_text("\n".join(text) + "\n")
        result = runner.invoke(app, ["decode", str(trained), "--input", str(source), "--beam", "3", "--nbest", "2",
                                     "--format", "jsonl"])
        assert result.exit_code == 0, result.output
        return [json.loads(line) for line in result.stdout.splitlines()]

    together = decoded(lines, "all.en")
    for n, line in enumerate(lines):
        alone = decoded([line], f"{n}.en")[0]
        assert [h["output"] for h in together[n]["nbest"]] == [h["output"] for h in alone["nbest"]]
        assert together[n]["score"] == pytest.approx(alone["score"], abs=1e-5)


def test_evaluate_reports_bleu_and_chrf(trained: Path) -> None:
    result = runner.invoke(app, ["evaluate", str(trained), "--split", "test"])
    assert result.exit_code == 0, result.output
    assert "BLEU" in result.output
    record = json.loads((trained / "eval_test.json").read_text())
    assert record["sentences"] == 20 and record["bleu"] >= 0 and record["chrf"] >= 0
    assert 1 < record["perplexity"] < 1000  # of the target tokens alone (loss target)


def test_commands_it_does_not_take_refuse_in_one_line(trained: Path) -> None:
    result = runner.invoke(app, ["generate", str(trained)], input="Ein Mann\n")
    assert result.exit_code == 2 and "decoder-only translator (model.prefix_lm)" in result.output
    assert "Traceback" not in result.output


def test_loss_both_trains(tiny_corpus: Path, tmp_path: Path) -> None:
    spec, run = tmp_path / "both.yaml", tmp_path / "run"
    body = prefix_lm_spec(tiny_corpus, run, loss="both")
    body["train"] |= {"max_steps": 2, "validate_every": 2, "checkpoint_every": 2}
    spec.write_text(yaml.safe_dump(body))
    result = runner.invoke(app, ["train", str(spec)])
    assert result.exit_code == 0, result.output
    assert json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["step"] == 2

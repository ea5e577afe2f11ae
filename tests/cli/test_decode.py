"""train → decode → evaluate through the CLI on a tiny run (fairseq's test_binaries idea)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from sacrebleu.metrics import BLEU
from typer.testing import CliRunner

from tbuild.cli.app import app

runner = CliRunner()


def test_decode_keeps_one_line_per_input(tiny_run: Path) -> None:
    text = "A man is riding a bike.\n\nTwo dogs play in the snow.\n"
    result = runner.invoke(app, ["decode", str(tiny_run)], input=text)
    assert result.exit_code == 0, result.output
    lines = result.stdout.split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == ""  # 3 lines + final newline


def test_decode_spec_run_and_checkpoint_agree(tiny_run: Path) -> None:
    text = "A man is riding a bike.\n"
    by_run = runner.invoke(app, ["decode", str(tiny_run), "--checkpoint", str(tiny_run / "best.safetensors")],
                           input=text)
    by_file = runner.invoke(app, ["decode", str(tiny_run / "best.safetensors")], input=text)
    assert by_run.exit_code == by_file.exit_code == 0
    assert by_run.stdout == by_file.stdout
    averaged = runner.invoke(app, ["decode", str(tiny_run), "--average", "2"], input=text)
    assert averaged.exit_code == 0, averaged.output


def test_nbest_format(tiny_run: Path) -> None:
    result = runner.invoke(app, ["decode", str(tiny_run), "--nbest", "3"], input="A dog runs.\nA cat.\n")
    assert result.exit_code == 0, result.output
    rows = [line.split(" ||| ") for line in result.stdout.splitlines()]
    assert [r[0] for r in rows] == ["0", "0", "0", "1", "1", "1"]
    scores = [float(r[2]) for r in rows[:3]]
    assert scores == sorted(scores, reverse=True)


def test_bad_input(tiny_run: Path, tmp_path: Path) -> None:
    bad = runner.invoke(app, ["decode", str(tiny_run)], input=b"fine\n\xff broken\n")
    assert bad.exit_code == 2 and "stdin: line 2 is not valid UTF-8" in bad.output
    missing = runner.invoke(app, ["decode", str(tiny_run), "--input", str(tmp_path / "nope.txt")])
    assert missing.exit_code == 2 and "input file not found" in missing.output
    long_line = " ".join(["word"] * 200) + "\n"
    result = runner.invoke(app, ["decode", str(tiny_run)], input=long_line)
    assert result.exit_code == 0
    assert "exceed the model's limit of 40; truncated" in result.stderr
    assert len(result.stdout.splitlines()) == 1
    not_run = runner.invoke(app, ["decode", str(tmp_path)])
    assert not_run.exit_code == 2 and "not a run directory" in not_run.output


def test_evaluate_scores_match_sacrebleu(tiny_run: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["evaluate", str(tiny_run), "--split", "test", "--show", "1"],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    report = json.loads((tiny_run / "eval_test.json").read_text())
    assert report["sentences"] == 20 and report["perplexity"] > 1
    assert report["bleu_signature"].startswith("nrefs:1|case:mixed")
    assert "case:lc" in report["bleu_lowercase_signature"]
    decoded = runner.invoke(app, ["decode", str(tiny_run), "--input", str(tiny_corpus / "test.en")])
    refs = (tiny_corpus / "test.de").read_text().splitlines()
    expected = BLEU().corpus_score(decoded.stdout.splitlines(), [refs]).score
    assert report["bleu"] == pytest.approx(expected)
    assert "BLEU signature: nrefs:1" in result.output


def test_attention_maps(tiny_run: Path, tmp_path: Path) -> None:
    import torch

    from tbuild.engine.decoding.attention_maps import attention_weights
    from tbuild.engine.decoding.native import load_native_engine
    from tbuild.engine.run.directory import resolve_run

    result = runner.invoke(app, ["attention", str(tiny_run), "--text", "A dog runs.", "--layers", "0",
                                 "-o", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for kind in ("encoder", "decoder", "cross"):
        assert (tmp_path / f"{kind}.png").read_bytes()[:4] == b"\x89PNG"
    translator = load_native_engine(resolve_run(tiny_run))
    src, tgt, weights = attention_weights(translator, "A dog runs.", beam=2, alpha=0.6, max_len_b=5)
    cross = weights["cross"][0]
    assert cross.shape == (2, len(tgt), len(src))
    torch.testing.assert_close(cross.sum(-1), torch.ones(2, len(tgt)))
    assert torch.all(weights["decoder"][0].triu(1) == 0)  # causal: no weight on later positions
    bad = runner.invoke(app, ["attention", str(tiny_run), "-t", "A dog.", "--layers", "7"])
    assert bad.exit_code == 2 and "no such layer/head" in bad.output


def test_decode_by_spec_file_uses_the_trained_run(tiny_run: Path) -> None:
    """The spec says vocab_size: from_tokenizer; its run directory holds the resolved spec."""
    spec_file = tiny_run.parent / "spec.yaml"
    by_spec = runner.invoke(app, ["decode", str(spec_file)], input="A dog runs.\n")
    by_run = runner.invoke(app, ["decode", str(tiny_run)], input="A dog runs.\n")
    assert by_spec.exit_code == 0, by_spec.output
    assert by_spec.stdout == by_run.stdout


def test_a_run_trained_with_a_given_tokenizer_decodes(tiny_run: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    """data.tokenizer.model: the run directory holds no spm.model; decoding uses the one it was trained with."""
    from tests.conftest import tiny_train_spec

    spec = tiny_train_spec(tiny_corpus, tmp_path / "run", max_steps=2, validate_every=2)
    spec["data"]["tokenizer"] = {"model": str(tiny_run / "spm.model")}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    assert runner.invoke(app, ["train", str(tmp_path / "spec.yaml")]).exit_code == 0
    assert not (tmp_path / "run" / "spm.model").exists()
    result = runner.invoke(app, ["decode", str(tmp_path / "run"), "--beam", "1"], input="A dog runs.\n")
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == 1


def test_stopping_at_the_beam_from_the_command_line(tiny_run: Path) -> None:
    """--stopping beam (fairseq's rule) decodes every line; the spec field takes it too; a bad value is one line."""
    text = "A man is riding a bike.\nTwo dogs play in the snow.\n"
    flag = runner.invoke(app, ["decode", str(tiny_run), "--stopping", "beam", "--nbest", "2"], input=text)
    assert flag.exit_code == 0, flag.output
    assert [line.split(" ||| ")[0] for line in flag.stdout.splitlines()] == ["0", "0", "1", "1"]
    by_set = runner.invoke(app, ["decode", str(tiny_run), "--set", "decode.stopping=beam", "--nbest", "2"], input=text)
    assert by_set.stdout == flag.stdout
    bad = runner.invoke(app, ["decode", str(tiny_run), "--stopping", "soon"], input=text)
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    assert len(bad.output.strip().splitlines()) == 1 and "decode.stopping" in bad.output, bad.output


def test_stopping_by_patience_from_the_command_line(tiny_run: Path) -> None:
    """--stopping patience --patience P decodes every line, as --set decode.patience=P does; patience 1 is
    stopping at the beam; a patience below 1 is one line naming the field."""
    text = "A man is riding a bike.\nTwo dogs play in the snow.\n"
    flag = runner.invoke(app, ["decode", str(tiny_run), "--stopping", "patience", "--patience", "1.5", "--nbest", "2"],
                         input=text)
    assert flag.exit_code == 0, flag.output
    assert [line.split(" ||| ")[0] for line in flag.stdout.splitlines()] == ["0", "0", "1", "1"]
    by_set = runner.invoke(app, ["decode", str(tiny_run), "--set", "decode.stopping=patience", "--set",
                                 "decode.patience=1.5", "--nbest", "2"], input=text)
    assert by_set.stdout == flag.stdout
    one = runner.invoke(app, ["decode", str(tiny_run), "--stopping", "patience", "--patience", "1"], input=text)
    beam = runner.invoke(app, ["decode", str(tiny_run), "--stopping", "beam"], input=text)
    assert one.exit_code == 0 and one.stdout == beam.stdout
    bad = runner.invoke(app, ["decode", str(tiny_run), "--stopping", "patience", "--patience", "0.5"], input=text)
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    assert len(bad.output.strip().splitlines()) == 1 and "decode.patience" in bad.output, bad.output

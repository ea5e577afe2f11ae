"""`tbuild decode/evaluate --engine ctranslate2`: the same input and output behaviour as native."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tbuild.cli.app import app

pytest.importorskip("ctranslate2", reason="ctranslate2 not installed (pip install -e '.[export]')")

runner = CliRunner()
CT2 = ["--engine", "ctranslate2", "--device", "cpu"]


@pytest.fixture()
def run_copy(tiny_run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(tiny_run, tmp_path / "run"))


def test_decode_same_as_native(run_copy: Path) -> None:
    text = "A man is riding a bike.\n\n" + " ".join(["word"] * 200) + "\nTwo dogs play.\n"
    native = runner.invoke(app, ["decode", str(run_copy), "--beam", "1", "--device", "cpu"], input=text)
    ct2 = runner.invoke(app, ["decode", str(run_copy), "--beam", "1", *CT2], input=text)
    assert native.exit_code == ct2.exit_code == 0, ct2.output
    assert ct2.stdout == native.stdout and ct2.stdout.split("\n")[1] == ""
    assert "line 3: 601 tokens exceed the model's limit of 40; truncated" in ct2.stderr
    assert "exporting to" in ct2.stderr
    again = runner.invoke(app, ["decode", str(run_copy), "--beam", "1", *CT2], input=text)
    assert again.stdout == ct2.stdout and "exporting" not in again.stderr  # the cached export


def test_decode_nbest_and_other_weights(run_copy: Path) -> None:
    result = runner.invoke(app, ["decode", str(run_copy), "--nbest", "3", *CT2], input="A dog runs.\n\nA cat.\n")
    assert result.exit_code == 0, result.output
    rows = [line.split(" ||| ") for line in result.stdout.splitlines()]
    assert [r[0] for r in rows] == ["0", "0", "0", "1", "2", "2", "2"] and rows[3] == ["1", "", "0.0000"]
    scores = [float(r[2]) for r in rows[:3]]
    assert scores == sorted(scores, reverse=True)
    step10 = run_copy / "checkpoints" / "step_00000010.safetensors"
    other = runner.invoke(app, ["decode", str(run_copy), "--checkpoint", str(step10), *CT2], input="A cat.\n")
    assert other.exit_code == 0 and "exported from other weights; exporting again" in other.stderr
    stamp = json.loads((run_copy / "ctranslate2-float32" / "tbuild-export.json").read_text())
    assert stamp["weights"] == step10.name


def test_decode_bad_input_and_options(run_copy: Path) -> None:
    bad = runner.invoke(app, ["decode", str(run_copy), *CT2], input=b"fine\n\xff broken\n")
    assert bad.exit_code == 2 and "stdin: line 2 is not valid UTF-8" in bad.output
    assert not (run_copy / "ctranslate2-float32").exists()  # refused before exporting
    native_q = runner.invoke(app, ["decode", str(run_copy), "--quantization", "int16"], input="A cat.\n")
    assert native_q.exit_code == 2 and "native engine supports float32 or int8" in native_q.output


def test_evaluate_with_ctranslate2(run_copy: Path) -> None:
    result = runner.invoke(app, ["evaluate", str(run_copy), "--split", "test", "--quantization", "int8", *CT2],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    report = json.loads((run_copy / "eval_test.json").read_text())
    assert report["engine"] == "ctranslate2" and report["precision"] == "int8 (cpu)"
    assert report["sentences"] == 20 and report["perplexity"] > 1 and report["bleu"] >= 0
    assert "(native model)" in result.output and "ctranslate2 engine" in result.output

"""Runs written before special ids became data (tbuild at 888ee3e, tests/fixtures/runs_888ee3e: a tiny translator
and a tiny language model sharing one sentencepiece model, each trained 400 steps on a Multi30k slice, kept as
spec.yaml, spm.model and best.safetensors) load unchanged and decode as they decoded then: the same outputs, the
same scores (the expected files were written by that version's `tbuild decode` and `tbuild generate`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tbuild.cli.app import app

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "runs_888ee3e"


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURES, tmp_path / "runs")
    return tmp_path / "runs"


def _run(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_translator_decodes_as_before(runs: Path) -> None:
    run = runs / "translator"
    lines = _run("decode", str(run), "-i", str(run / "input.txt"), "--format", "jsonl").splitlines()
    expected = [json.loads(line) for line in (run / "expected_beam.jsonl").read_text().splitlines()]
    got = [json.loads(line) for line in lines]
    assert [g["output"] for g in got] == [e["output"] for e in expected]
    assert [g["tokens"] for g in got] == [e["tokens"] for e in expected]
    for g, e in zip(got, expected, strict=True):
        assert g["score"] == pytest.approx(e["score"], abs=1e-4)
        assert g["token_log_probs"] == pytest.approx(e["token_log_probs"], abs=1e-4)
    greedy = _run("decode", str(run), "-i", str(run / "input.txt"), "--beam", "1")
    assert greedy == (run / "expected_greedy.txt").read_text()


def test_the_language_model_generates_as_before(runs: Path) -> None:
    run = runs / "lm"
    assert _run("generate", str(run), "-i", str(run / "input.txt")) == (run / "expected_greedy.txt").read_text()
    beam = _run("generate", str(run), "-i", str(run / "input.txt"), "--beam", "3", "--nbest", "2")
    assert beam == (run / "expected_beam.txt").read_text()

"""A grapheme-to-phoneme model through the CLI alone (``task: g2p`` over files, a tiny model, a few steps, synthetic
words whose phones are their letters in capitals): train selects on the phone error rate (lower is better);
evaluate reports PER and WER and keeps them in its record; decode takes plain words and writes what evaluate
scored; the server's /phonemize answers as decode, and another task's route names it; evaluate --against
compares PER by paired bootstrap; the card shows the rates; a sweep's table and a study's objective (minimised)
are PER."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.engine.tasks.g2p.rates import Rates

runner = CliRunner()
SIZES = {"train": 80, "valid": 12, "test": 10}


def write_words(root: Path) -> list[str]:
    """PREFIX.word (a word's letters, space-separated) and PREFIX.phones (the letters in capitals); the test
    split's words."""
    rng = random.Random(3)
    test = []
    for split, n in SIZES.items():
        words = ["".join(rng.choice("abcdefg") for _ in range(rng.randint(2, 6))) for _ in range(n)]
        (root / f"{split}.word").write_text("".join(" ".join(w) + "\n" for w in words))
        (root / f"{split}.phones").write_text("".join(" ".join(w.upper()) + "\n" for w in words))
        test = words
    return test


def g2p_spec(root: Path) -> dict:
    """A tiny G2P model over the files in ``root`` (selected on the PER of 6 valid words)."""
    return {"task": "g2p",
            "model": {"d_model": 32, "max_positions": 32, "encoder": {"layers": 1, "heads": 2, "d_ff": 64},
                      "decoder": {"layers": 1, "heads": 2, "d_ff": 64}},
            "data": {"source_lang": "word", "target_lang": "phones", "train": str(root / "train"),
                     "valid": str(root / "valid"), "test": str(root / "test"),
                     "tokenizer": {"vocab_size": 26, "target_tokens": "whole"}},
            "train": {"max_steps": 4, "validate_every": 2, "checkpoint_every": 2, "checkpoint_minutes": None,
                      "batch_tokens": 400, "threads": 1, "precision": "fp32", "log_every": 1,
                      "select": {"metric": "per", "lines": 6}},
            "decode": {"beam": 2, "max_len_a": 1.0, "max_len_b": 2, "precision": "fp32"}}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The model trained through `tbuild train` (4 steps, checkpoints at 2 and 4, selected on PER) and the test
    split's words."""
    root = tmp_path_factory.mktemp("g2p")
    words = write_words(root)
    spec = g2p_spec(root) | {"output_dir": str(root / "run")}
    (root / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = runner.invoke(app, ["train", str(root / "spec.yaml")])
    assert result.exit_code == 0, result.output
    assert "per" in result.output
    return root / "run", words


def evaluated(run: Path, *args: str) -> str:
    result = runner.invoke(app, ["evaluate", str(run), "--split", "test", *args], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def test_evaluate_reports_the_error_rates_and_decode_writes_what_it_scored(trained: tuple[Path, list[str]]) -> None:
    run, words = trained
    output = evaluated(run, "--show", "2")
    assert "PER" in output and "WER" in output
    record = json.loads((run / "eval_test.json").read_text())
    hyps = (run / "eval_test.out").read_text().splitlines()
    references = (run.parent / "test.phones").read_text().splitlines()
    rates = Rates.of(hyps, references)
    assert (record["per"], record["wer"]) == (pytest.approx(rates.per), pytest.approx(rates.wer))
    assert "bleu" not in record
    decoded = runner.invoke(app, ["decode", str(run)], input="".join(w + "\n" for w in words))  # plain words
    assert decoded.exit_code == 0, decoded.output
    assert decoded.stdout.splitlines() == hyps


def test_the_server_phonemizes_as_decode_does(trained: tuple[Path, list[str]]) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from tbuild.engine.run.directory import resolve_run
    from tbuild.engine.serving.app import create_app
    from tbuild.engine.tasks.service import open_service

    run, words = trained
    decoded = runner.invoke(app, ["decode", str(run)], input="".join(w + "\n" for w in words[:4]))
    service = open_service(resolve_run(run), max_wait_ms=5)
    try:
        with TestClient(create_app(service)) as client:
            response = client.post("/phonemize", json={"words": words[:4]})
            other = client.post("/translate", json={"src": words[:4]})
            info = client.get("/info").json()
    finally:
        service.close()
    assert response.status_code == 200, response.text
    assert response.json() == {"phonemes": decoded.stdout.splitlines()}
    assert other.status_code == 404 and "serves a grapheme-to-phoneme model at POST /phonemize" in other.text
    assert info["endpoint"] == "/phonemize"


def test_evaluate_against_compares_per_and_the_card_shows_the_rates(trained: tuple[Path, list[str]]) -> None:
    run, _ = trained
    other = run / "checkpoints" / "step_00000002.safetensors"
    assert "paired bootstrap" in evaluated(run, "--against", str(other), "--bootstrap", "50", "--show", "0")
    record = json.loads((run / "eval_test.json").read_text())
    assert list(record["comparison"]["metrics"]) == ["PER", "WER"]
    assert record["comparison"]["metrics"]["PER"]["score"] == pytest.approx(record["per"])
    card = runner.invoke(app, ["card", str(run)])
    assert card.exit_code == 0, card.output
    assert f"| test | {SIZES['test']} | {record['per']:.2f} | {record['wer']:.2f} |" in card.output


def test_a_rate_needs_the_task(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text("data: {train: a, valid: b}\ntrain:\n  select: {metric: per}\n")
    result = runner.invoke(app, ["validate", str(tmp_path / "spec.yaml")])
    assert result.exit_code == 2 and "per (phone error rate) scores a grapheme-to-phoneme model" in result.output


def test_a_sweep_tabulates_per_and_a_study_minimizes_it(tmp_path: Path) -> None:
    pytest.importorskip("optuna")
    write_words(tmp_path)
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(g2p_spec(tmp_path)))
    (tmp_path / "sweep.yaml").write_text(
        f"base: base.yaml\noutput_dir: {tmp_path / 'out'}\nset: {{train.max_steps: 2}}\nrows:\n"
        "  - {name: base, label: base}\n  - {name: ls0, label: A, set: {train.label_smoothing: 0.0}}\n")
    result = runner.invoke(app, ["sweep", str(tmp_path / "sweep.yaml")], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    table = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [r["row"] for r in table] == ["base", "ls0"] and "dev BLEU" not in table[0]
    assert table[1]["dev Δ"] == pytest.approx(table[1]["dev PER"] - table[0]["dev PER"])
    (tmp_path / "study.yaml").write_text(
        f"base: base.yaml\noutput_dir: {tmp_path / 'study'}\nspace:\n  model.dropout.residual: {{choice: [0.0, 0.1]}}\n"
        "objective: {metric: per, lines: 6}\nbudget: {trials: 2, trial_steps: 2}\n"
        "sampler: {kind: random, seed: 3}\npruner: {kind: none}\n")
    result = runner.invoke(app, ["tune", str(tmp_path / "study.yaml")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "objective: validation per, minimize" in result.output
    for folder in sorted((tmp_path / "study" / "trials").iterdir()):
        trial = json.loads((folder / "trial.json").read_text())
        assert trial["value"] == pytest.approx(json.loads((folder / "eval_valid.json").read_text())["per"])


def test_the_decoding_check_compares_precisions_by_the_phone_error_rate(tmp_path: Path) -> None:
    from tbuild.builder.spec import Spec
    from tbuild.engine.tasks.registry import task_of

    spec = Spec.model_validate(g2p_spec(tmp_path))
    metric = task_of(spec).check_metric(spec)
    assert not metric.higher and metric.score(["A B"], ["A C"]) == pytest.approx(50.0)

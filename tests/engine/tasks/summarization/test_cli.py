"""A summarizer through the CLI alone (``task: summarization``, a tiny model, a few steps, synthetic files whose
summary is the source's first three words): train selects on ROUGE-L; evaluate reports ROUGE-1/2/L beside the
lead-N baseline (N = 3 chosen on valid) and keeps them in its record; decode writes what evaluate scored; the
server's /summarize answers as decode; evaluate --against compares ROUGE by paired bootstrap; the card shows
ROUGE; a sweep's table and a study's objective are ROUGE-L."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.engine.tasks.summarization.lead import lead
from tbuild.engine.tasks.summarization.rouge import Rouge

runner = CliRunner()
WORDS = ("storm", "river", "market", "council", "school", "bridge", "farmers", "prices", "rain", "festival",
         "police", "museum", "train", "harbour", "library", "votes", "winter", "factory")
SIZES = {"train": 80, "valid": 12, "test": 10}


def write_pairs(root: Path) -> None:
    """PREFIX.doc (8 to 14 words) and PREFIX.sum (its first three words) for each split."""
    rng = random.Random(7)
    for split, n in SIZES.items():
        docs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 14))) for _ in range(n)]
        (root / f"{split}.doc").write_text("".join(d + "\n" for d in docs))
        (root / f"{split}.sum").write_text("".join(lead(d, 3) + "\n" for d in docs))


def summarizer_spec(root: Path, **train: object) -> dict:
    """A tiny summarizer over the files in ``root`` (selected on ROUGE-L of 6 valid lines)."""
    return {"task": "summarization",
            "model": {"d_model": 32, "max_positions": 64, "encoder": {"layers": 1, "heads": 2, "d_ff": 64},
                      "decoder": {"layers": 1, "heads": 2, "d_ff": 64}},
            "data": {"source_lang": "doc", "target_lang": "sum", "train": str(root / "train"),
                     "valid": str(root / "valid"), "test": str(root / "test"), "tokenizer": {"vocab_size": 60}},
            "train": {"max_steps": 4, "validate_every": 2, "checkpoint_every": 2, "checkpoint_minutes": None,
                      "batch_tokens": 400, "threads": 1, "precision": "fp32", "log_every": 1,
                      "select": {"metric": "rouge_l", "lines": 6}, **train},
            "decode": {"beam": 2, "max_len_a": 0.0, "max_len_b": 6, "precision": "fp32"}}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The summarizer trained through `tbuild train` (4 steps, checkpoints at 2 and 4)."""
    root = tmp_path_factory.mktemp("summarizer")
    write_pairs(root)
    spec = summarizer_spec(root) | {"output_dir": str(root / "run")}
    (root / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = runner.invoke(app, ["train", str(root / "spec.yaml")])
    assert result.exit_code == 0, result.output
    return root / "run"


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def evaluated(run: Path, *args: str) -> str:
    result = runner.invoke(app, ["evaluate", str(run), "--split", "test", *args], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def test_training_selects_on_validation_rouge_l(run: Path) -> None:
    valid = [json.loads(line) for line in lines(run / "valid.jsonl")]
    assert [v["step"] for v in valid] == [2, 4]
    assert all(v["metric"] == "rouge_l" and 0 <= v["score"] <= 100 for v in valid)
    assert yaml.safe_load((run / "spec.yaml").read_text())["task"] == "summarization"


def test_evaluate_reports_rouge_beside_the_lead_baseline(run: Path) -> None:
    output = evaluated(run, "--show", "1")
    assert "ROUGE-L" in output and "lead baseline" in output and "first 3 words" in output
    record = json.loads((run / "eval_test.json").read_text())
    references, sources = lines(run.parent / "test.sum"), lines(run.parent / "test.doc")
    scored = Rouge.of(lines(run / "eval_test.out"), references)  # the kept outputs, scored again
    assert [record[k] for k in ("rouge1", "rouge2", "rouge_l")] == pytest.approx(
        [scored.rouge1, scored.rouge2, scored.rouge_l])
    assert record["lead"]["n"] == 3 and record["lead"]["valid_rouge_l"] == pytest.approx(100.0)
    assert record["lead"]["rouge_l"] == pytest.approx(Rouge.of([lead(s, 3) for s in sources], references).rouge_l)
    assert "bleu" not in record and record["sentences"] == SIZES["test"] and "rouge-score" in record["rouge_signature"]


def test_decode_writes_what_evaluate_scored(run: Path) -> None:
    evaluated(run)
    result = runner.invoke(app, ["decode", str(run)], input=(run.parent / "test.doc").read_text())
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == lines(run / "eval_test.out")


def test_the_server_summarizes_as_decode_does(run: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from tbuild.engine.run.directory import resolve_run
    from tbuild.engine.serving.app import create_app
    from tbuild.engine.tasks.service import open_service

    docs = lines(run.parent / "test.doc")[:4]
    long = " ".join(docs * 40)[:1900]  # over the model's positions
    decoded = runner.invoke(app, ["decode", str(run)], input="".join(d + "\n" for d in [*docs, long]))
    service = open_service(resolve_run(run), max_wait_ms=5)
    try:
        with TestClient(create_app(service)) as client:
            response = client.post("/summarize", json={"texts": docs})
            truncated = client.post("/summarize", json={"texts": [docs[0], long], "scores": True})
            translate = client.post("/translate", json={"src": docs})
            info = client.get("/info").json()
            paths = set(client.get("/openapi.json").json()["paths"])
    finally:
        service.close()
    assert response.status_code == 200, response.text
    assert response.json() == {"summaries": decoded.stdout.splitlines()[:4]}
    answer = truncated.json()  # a long text summarized from its first tokens, as decode reads it, and named
    assert (answer["summaries"], answer["truncated"]) == (decoded.stdout.splitlines()[::4], [1])
    assert translate.status_code == 404 and "serves a summarizer at POST /summarize" in translate.json()["error"]
    assert info["endpoint"] == "/summarize" and "bleu" not in info and "source_lang" not in info
    assert set(info["scores"]["test"]) >= {"rouge1", "rouge2", "rouge_l", "perplexity"}
    assert paths == {"/summarize", "/health", "/info"}


def test_evaluate_against_compares_rouge_and_keeps_the_record(run: Path) -> None:
    other = run / "checkpoints" / "step_00000002.safetensors"
    output = evaluated(run, "--against", str(other), "--bootstrap", "50", "--show", "0")
    assert "paired bootstrap" in output
    record = json.loads((run / "eval_test.json").read_text())
    assert list(record["comparison"]["metrics"]) == ["ROUGE-L", "ROUGE-1", "ROUGE-2"]
    assert record["comparison"]["metrics"]["ROUGE-L"]["score"] == pytest.approx(record["rouge_l"])
    assert record["lead"]["n"] == 3  # the task's own fields kept when the comparison was written in


def test_the_card_shows_rouge(run: Path) -> None:
    evaluated(run)
    result = runner.invoke(app, ["card", str(run)])
    assert result.exit_code == 0, result.output
    assert "pipeline_tag: summarization" in result.output and "summarizing doc text" in result.output
    row = next(line for line in result.output.splitlines() if line.startswith(f"| test | {SIZES['test']} |"))
    record = json.loads((run / "eval_test.json").read_text())
    assert f"| {record['rouge_l']:.2f} |" in row and "N=3" in row


def test_a_rouge_metric_needs_the_task(tmp_path: Path) -> None:
    write_pairs(tmp_path)
    spec = summarizer_spec(tmp_path)
    del spec["task"]
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = runner.invoke(app, ["validate", str(tmp_path / "spec.yaml")])
    assert result.exit_code == 2 and "declare the task (task: summarization)" in result.output


@pytest.fixture
def base(tmp_path: Path) -> Iterator[Path]:
    write_pairs(tmp_path)
    spec = summarizer_spec(tmp_path, max_steps=1000)
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(spec))
    yield tmp_path / "base.yaml"


def test_a_sweep_tabulates_rouge_l(base: Path) -> None:
    sweep = base.parent / "sweep.yaml"
    sweep.write_text(f"base: base.yaml\noutput_dir: {base.parent / 'out'}\nset: {{train.max_steps: 2}}\nrows:\n"
                     "  - {name: base, label: base}\n  - {name: ls0, label: A, set: {train.label_smoothing: 0.0}}\n")
    result = runner.invoke(app, ["sweep", str(sweep)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    table = json.loads((base.parent / "out" / "results.json").read_text())
    assert [r["row"] for r in table] == ["base", "ls0"] and "dev BLEU" not in table[0]
    for row in table:
        folder = next((base.parent / "out").glob(f"{row['row']}-*"))
        kept = json.loads((folder / "sweep_row.json").read_text())["scores"]
        assert set(kept["valid"]) == {"rouge1", "rouge2", "rouge_l", "ppl"}
        assert row["dev ROUGE-L"] == pytest.approx(kept["valid"]["rouge_l"])
        assert row["test ROUGE-L"] == pytest.approx(kept["test"]["rouge_l"])
    assert table[1]["dev Δ"] == pytest.approx(table[1]["dev ROUGE-L"] - table[0]["dev ROUGE-L"])


def test_a_study_optimizes_rouge_l(base: Path) -> None:
    pytest.importorskip("optuna")
    study = base.parent / "study.yaml"
    study.write_text(f"base: base.yaml\noutput_dir: {base.parent / 'study'}\n"
                     "space:\n  model.dropout.residual: {choice: [0.0, 0.1]}\n"
                     "objective: {metric: rouge_l, lines: 6}\nbudget: {trials: 2, trial_steps: 2}\n"
                     "sampler: {kind: random, seed: 3}\npruner: {kind: none}\n")
    result = runner.invoke(app, ["tune", str(study)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "objective: validation rouge_l, maximize" in result.output
    for folder in sorted((base.parent / "study" / "trials").iterdir()):
        trial = json.loads((folder / "trial.json").read_text())
        assert trial["state"] == "complete"
        assert trial["value"] == pytest.approx(json.loads((folder / "eval_valid.json").read_text())["rouge_l"])

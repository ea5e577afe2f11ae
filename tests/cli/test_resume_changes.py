"""Resuming with a changed spec: every change is said with what it does, or refused (issue 23)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from tbuild.builder import load_spec
from tbuild.builder.spec import InverseSqrtSchedule
from tbuild.cli.app import app
from tbuild.engine.run.directory import RunDir
from tbuild.engine.training.changes import spec_changes
from tests.conftest import tiny_train_spec

runner = CliRunner()


def test_each_kind_of_change_is_classified(tiny_corpus: Path, tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(tiny_train_spec(tiny_corpus, tmp_path / "run")))
    old = load_spec(tmp_path / "a.yaml").spec
    new = load_spec(tmp_path / "a.yaml", [
        "name=other", "model.d_model=64", "data.tokenizer.vocab_size=300", "data.max_length=32",
        "data.valid=elsewhere", "train.schedule.lr=0.002", "train.optimizer.eps=1e-8", "train.max_steps=9",
        "train.label_smoothing=0.2", "decode.beam=2",
    ]).spec
    kinds = {c.field: c.kind for c in spec_changes(old, new)}
    derived = {f"model.{side}.{d}": "architecture" for side in ("encoder", "decoder") for d in ("d_k", "d_v")}
    assert kinds == {**derived, "model.d_model": "architecture", "data.tokenizer.vocab_size": "tokenizer",
                     "data.max_length": "data", "data.valid": "evaluation", "train.schedule.lr": "schedule",
                     "train.optimizer.eps": "optimizer", "train.max_steps": "budget",
                     "train.label_smoothing": "training", "decode.beam": "decoding"}  # name: not a change
    assert spec_changes(old, old) == []


def test_resume_says_what_changed_and_refuses_another_model(tiny_corpus: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(tiny_train_spec(tiny_corpus, run, max_steps=3, validate_every=100)))
    new = runner.invoke(app, ["train", str(spec), "--dry-run"])
    assert new.exit_code == 0 and "no run there yet" in new.output and not run.exists()
    assert runner.invoke(app, ["train", str(spec)]).exit_code == 0
    same = runner.invoke(app, ["train", str(spec), "--dry-run"])
    assert same.exit_code == 0 and "nothing changed since its last call" in same.output

    lr = ["--set", "train.schedule.lr=0.0005", "--set", "train.max_steps=5"]
    dry = runner.invoke(app, ["train", str(spec), *lr, "--dry-run"], env={"COLUMNS": "300"})
    assert dry.exit_code == 0, dry.output
    assert "2 changes since its last call" in dry.output
    assert "train.schedule.lr: 0.001 → 0.0005 (the learning rate follows the new schedule" in dry.output
    assert "train.max_steps: 3 → 5" in dry.output and len(RunDir(run).step_checkpoints()) == 1  # nothing trained

    resumed = runner.invoke(app, ["train", str(spec), *lr], env={"COLUMNS": "300"})
    assert resumed.exit_code == 0, resumed.output
    assert "changed since the run's last call: train.schedule.lr: 0.001 → 0.0005" in resumed.output
    assert "resumed from step_00000003.safetensors" in resumed.output
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    step4 = next(r for r in records if r.get("step") == 4 and "lr" in r)
    d_model = 32
    assert step4["lr"] == InverseSqrtSchedule(lr=0.0005, warmup=4).rate(4, d_model)  # in force from step 4
    assert "lr: 0.0005" in (run / "spec.yaml").read_text()

    wider = runner.invoke(app, ["train", str(spec), *lr, "--set", "model.d_model=64"], env={"COLUMNS": "300"})
    assert wider.exit_code == 2
    assert "cannot go on with model.d_model: 32 → 64;" in wider.output and "--fresh" in wider.output
    assert "d_model: 32" in (run / "spec.yaml").read_text()  # the stored spec is kept


def test_changed_data_is_read_from_a_new_epoch(tiny_corpus: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(tiny_train_spec(tiny_corpus, run, max_steps=3, validate_every=100)))
    assert runner.invoke(app, ["train", str(spec)]).exit_code == 0
    again = runner.invoke(app, ["train", str(spec), "--set", "data.max_length=20", "--set", "train.max_steps=4"],
                          env={"COLUMNS": "300"})
    assert again.exit_code == 0, again.output
    assert "data.max_length: 64 → 20 (the training split is prepared again" in again.output
    assert "data.train was prepared anew since step 3: reading it from the start of epoch 2" in again.output

"""`tbuild train`'s budgets and --fresh, through the CLI on a tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tests.conftest import tiny_train_spec

runner = CliRunner()


def _spec(tiny_corpus: Path, tmp_path: Path, **train: object) -> tuple[Path, Path]:
    run = tmp_path / "run"
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(tiny_train_spec(tiny_corpus, run, **train)))
    return spec, run


def _steps(run: Path) -> int:
    return json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["step"]


def test_minutes_is_more_minutes_each_time(tiny_corpus: Path, tmp_path: Path) -> None:
    """--minutes N trains N more minutes per call (each call takes at least one step), up to the spec's
    train.max_minutes over all calls."""
    spec, run = _spec(tiny_corpus, tmp_path, max_steps=None, max_minutes=0.05, validate_every=1000,
                      checkpoint_every=None)
    first = runner.invoke(app, ["train", str(spec), "--minutes", "0.001"])
    assert first.exit_code == 0, first.output
    assert "--minutes 0.001 done; run the same command to train more" in first.output
    after_first = _steps(run)
    second = runner.invoke(app, ["train", str(spec), "--minutes", "0.001"])
    assert second.exit_code == 0, second.output
    assert "resum" in second.output.lower() and _steps(run) > after_first
    rest = runner.invoke(app, ["train", str(run)])  # a run directory trains on in place, to the total budget
    assert rest.exit_code == 0, rest.output
    assert "the run's time budget, train.max_minutes=0.05 over all resumes, is spent" in rest.output
    total = _steps(run)
    spent = runner.invoke(app, ["train", str(spec), "--minutes", "1"])
    assert spent.exit_code == 0 and "train.max_minutes=0.05 over all resumes, is spent" in spent.output
    assert _steps(run) == total


def test_a_spec_without_a_stop_trains_for_the_minutes_given(tiny_corpus: Path, tmp_path: Path) -> None:
    """No max_steps, max_epochs or max_minutes: valid, and trained for --minutes; without it, one line."""
    spec, run = _spec(tiny_corpus, tmp_path, max_steps=None, validate_every=1000, checkpoint_every=None)
    assert runner.invoke(app, ["validate", str(spec)]).exit_code == 0
    refused = runner.invoke(app, ["train", str(spec)])
    assert refused.exit_code == 2 and "training needs a stop" in refused.output and "--minutes" in refused.output
    assert not run.exists()  # refused before anything is written
    trained = runner.invoke(app, ["train", str(spec), "--minutes", "0.001"])
    assert trained.exit_code == 0, trained.output
    assert "--minutes 0.001 done" in trained.output and _steps(run) >= 1


@pytest.mark.parametrize("what", ["not a run", "the working directory", "a file"])
def test_fresh_deletes_only_a_run_directory(what: str, tiny_corpus: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    spec, _ = _spec(tiny_corpus, tmp_path)
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    (folder / "spec.yaml").write_text("model: {d_model: 32}\n")  # a spec, not a run's resolved one
    target = folder / "notes.txt" if what == "a file" else folder
    if what == "the working directory":
        monkeypatch.chdir(folder)
        target = Path(".")
    result = runner.invoke(app, ["train", str(spec), "--fresh", "--set", f"output_dir={target}"])
    assert result.exit_code == 2
    assert "--fresh: refusing to delete" in result.output and len(result.output.strip().splitlines()) == 1
    assert (folder / "notes.txt").read_text() == "keep me"


def test_fresh_starts_a_run_over(tiny_corpus: Path, tmp_path: Path) -> None:
    spec, run = _spec(tiny_corpus, tmp_path, max_steps=3)
    assert runner.invoke(app, ["train", str(spec)]).exit_code == 0
    (run / "extra.txt").write_text("from the old run")
    again = runner.invoke(app, ["train", str(spec), "--fresh", "--set", "train.max_steps=2"])
    assert again.exit_code == 0, again.output
    assert not (run / "extra.txt").exists() and _steps(run) == 2

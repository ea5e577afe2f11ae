"""train.log: TensorBoard event files read back with tensorboard's own reader, MLflow's local file
store read back with its client, a missing tracker's one-line error with the pip command before
training, and an unknown one named."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.engine.errors import TbuildError
from tbuild.engine.training.loggers import LOGGERS, check_loggers
from tests.conftest import tiny_train_spec

runner = CliRunner()


def train(corpus: Path, root: Path, log: list[str]) -> Path:
    spec = tiny_train_spec(corpus, root / "run", max_steps=4, validate_every=2, checkpoint_every=4, log=log)
    (root / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = runner.invoke(app, ["train", str(root / "spec.yaml")])
    assert result.exit_code == 0, result.output
    return root / "run"


@pytest.mark.skipif(importlib.util.find_spec("tensorboard") is None, reason="pip install 'tbuild[tensorboard]'")
@pytest.mark.skipif(importlib.util.find_spec("mlflow") is None, reason="pip install 'tbuild[mlflow]'")
def test_tensorboard_and_mlflow_hold_the_runs_metrics(tiny_corpus: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # the logger sets it too; the client below reads it
    run = train(tiny_corpus, tmp_path, ["jsonl", "tensorboard", "mlflow"])
    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert {"train/loss", "train/nll", "train/ppl", "train/lr", "train/grad_norm", "train/tokens_per_s",
            "valid/ppl"} <= set(tags)
    assert [e.step for e in events.Scalars("train/loss")] == [1, 2, 3, 4]
    assert [e.step for e in events.Scalars("valid/ppl")] == [2, 4]
    assert "spec" in str(events.Tags()["tensors"])  # the spec as text
    client = MlflowClient(tracking_uri=(run / "mlruns").resolve().as_uri())
    [experiment] = [e for e in client.search_experiments() if e.name != "Default"]
    [logged] = client.search_runs([experiment.experiment_id])
    assert logged.data.params["model.d_model"] == "32" and logged.data.params["model.encoder.layers"] == "1"
    assert [m.step for m in client.get_metric_history(logged.info.run_id, "train_loss")] == [1, 2, 3, 4]
    assert len(client.get_metric_history(logged.info.run_id, "valid_ppl")) == 2
    artifacts = {a.path for a in client.list_artifacts(logged.info.run_id)}
    assert {"spec.yaml", "metrics.jsonl", "valid.jsonl", "spm.model"} <= artifacts


@pytest.mark.skipif(importlib.util.find_spec("mlflow") is None, reason="pip install 'tbuild[mlflow]'")
def test_mlflow_keeps_a_tokenizers_file_as_the_runs_tokenizer(tiny_corpus: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose tokenizer is a tokenizer.json (an imported model's) has it among the artifacts."""
    from mlflow.tracking import MlflowClient

    from tbuild.builder.spec import Spec

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    (tmp_path / "tokenizer.json").write_text("{}")
    logger = LOGGERS.get("mlflow").factory(Spec.model_validate(tiny_train_spec(tiny_corpus, tmp_path)), tmp_path)
    logger.close()
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").resolve().as_uri())
    [experiment] = [e for e in client.search_experiments() if e.name != "Default"]
    [logged] = client.search_runs([experiment.experiment_id])
    assert [a.path for a in client.list_artifacts(logged.info.run_id)] == ["tokenizer.json"]


def test_a_missing_tracker_is_one_line_with_the_pip_command(tiny_corpus: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    entry = LOGGERS.get("tensorboard")
    monkeypatch.setitem(LOGGERS.entries, "tensorboard", type(entry)(entry.factory, "tbuild_no_such_module", entry.pip))
    spec = tiny_train_spec(tiny_corpus, tmp_path / "run", log=["tensorboard"])
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = runner.invoke(app, ["train", str(tmp_path / "spec.yaml")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: train.log: tensorboard needs the tbuild_no_such_module package: pip install 'tbuild[tensorboard]' "
        "(from a clone: pip install -e '.[tensorboard]')"]
    assert not (tmp_path / "run" / "metrics.jsonl").exists()  # nothing trained


def test_an_unknown_tracker_is_named() -> None:
    with pytest.raises(TbuildError, match="no logger 'wandbx'; known: jsonl, mlflow, tensorboard"):
        check_loggers(["jsonl", "wandbx"])

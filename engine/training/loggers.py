"""Experiment trackers beside metrics.jsonl (which is always written): ``train.log`` names them. A
small registry like the component one: ``@LOGGERS.register("name", package, extra)`` on a class with
``train(record)``, ``valid(record)`` and ``close()``, constructed with the spec and the run folder;
others (wandb, …) come as plugins through the ``tbuild.loggers`` entry point group. Each tracker's
package is an optional extra: a missing one is a one-line error with the pip command, raised before
training starts (``check_loggers``). Only the main process logs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol

from tbuild.builder.spec import Spec

from ..errors import TbuildError
from ..extras import check_installed
from ..run.directory import SPM_FILE, TOKENIZERS_FILE

JSONL = "jsonl"  # metrics.jsonl and valid.jsonl (metrics.py): always on


class Logger(Protocol):
    def train(self, record: dict[str, Any]) -> None: ...

    def valid(self, record: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Entry:
    factory: Callable[[Spec, Path], Logger]
    package: str  # the module it needs
    pip: str  # what to install: tbuild's extra ("tbuild[mlflow]") or a plugin's package (extras.install_hint)


class Registry:
    def __init__(self) -> None:
        self.entries: dict[str, Entry] = {}
        self._plugins_loaded = False

    def register(self, name: str, package: str, pip: str) -> Callable[[type], type]:
        def add(cls: type) -> type:
            self.entries[name] = Entry(cls, package, pip)
            return cls

        return add

    def get(self, name: str) -> Entry:
        if name not in self.entries and not self._plugins_loaded:
            self._plugins_loaded = True
            for point in entry_points(group="tbuild.loggers"):
                point.load()  # registers itself
        if name not in self.entries:
            known = ", ".join([JSONL, *sorted(self.entries)])
            raise TbuildError(f"train.log: no logger {name!r}; known: {known}")
        return self.entries[name]


LOGGERS = Registry()


def scalars(record: dict[str, Any]) -> dict[str, float]:
    """The record's numbers (not its step, epoch or flags)."""
    return {k: float(v) for k, v in record.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and k not in ("step", "epoch")}


def check_loggers(names: list[str]) -> None:
    """Every logger named is known and its package installed (else a one-line error with the pip command)."""
    for name in names:
        if name == JSONL:
            continue
        entry = LOGGERS.get(name)
        check_installed(entry.package, entry.pip, f"train.log: {name}")


def open_loggers(names: list[str], spec: Spec, run_dir: Path) -> list[Logger]:
    """The trackers named (checked by ``check_loggers`` when training starts), the JSONL log aside."""
    return [LOGGERS.get(name).factory(spec, run_dir) for name in dict.fromkeys(names) if name != JSONL]


@LOGGERS.register("tensorboard", "tensorboard", "tbuild[tensorboard]")
class TensorBoardLogger:
    """Scalars under train/ and valid/, the resolved spec as text; event files in RUN/tensorboard/."""

    def __init__(self, spec: Spec, run_dir: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"))
        spec_yaml = (run_dir / "spec.yaml").read_text() if (run_dir / "spec.yaml").is_file() else spec.model_dump_json()
        self.writer.add_text("spec", "```\n" + spec_yaml + "\n```")

    def _write(self, prefix: str, record: dict[str, Any]) -> None:
        for key, value in scalars(record).items():
            self.writer.add_scalar(f"{prefix}/{key}", value, record["step"])
        self.writer.flush()

    def train(self, record: dict[str, Any]) -> None:
        self._write("train", record)

    def valid(self, record: dict[str, Any]) -> None:
        self._write("valid", record)

    def close(self) -> None:
        self.writer.close()


@LOGGERS.register("mlflow", "mlflow", "tbuild[mlflow]")
class MLflowLogger:
    """A run in the experiment named after the spec: the spec's fields as params, the metrics, and at
    the end the run folder's spec, metrics and tokenizer as artifacts. The tracking store is
    $MLFLOW_TRACKING_URI, else a local file store in RUN/mlruns."""

    def __init__(self, spec: Spec, run_dir: Path) -> None:
        import os

        import mlflow

        self.mlflow, self.run_dir = mlflow, run_dir
        if not os.environ.get("MLFLOW_TRACKING_URI"):
            # MLflow 3 keeps its local file store in maintenance mode behind this opt-in; it is the store that
            # needs no server and no database (mlflow-skinny has no SQLAlchemy)
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            mlflow.set_tracking_uri((run_dir / "mlruns").resolve().as_uri())
        mlflow.set_experiment(spec.name or run_dir.name)
        self.run = mlflow.start_run(run_name=run_dir.name)
        mlflow.log_params({k: str(v)[:250] for k, v in _flat(spec.model_dump(mode="json")).items()})

    def train(self, record: dict[str, Any]) -> None:
        self.mlflow.log_metrics({f"train_{k}": v for k, v in scalars(record).items()}, step=record["step"])

    def valid(self, record: dict[str, Any]) -> None:
        self.mlflow.log_metrics({f"valid_{k}": v for k, v in scalars(record).items()}, step=record["step"])

    def close(self) -> None:
        for name in ("spec.yaml", "metrics.jsonl", "valid.jsonl", SPM_FILE, TOKENIZERS_FILE):  # the tokenizer: either
            if (self.run_dir / name).is_file():
                self.mlflow.log_artifact(str(self.run_dir / name))
        self.mlflow.end_run()


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict) and data:
        return {k: v for key, value in data.items()
                for k, v in _flat(value, f"{prefix}.{key}" if prefix else key).items()}
    return {prefix: data}

"""Run directories, and the one place that turns what a user names (a spec file, a run directory or
a checkpoint file) into a spec and its run. Imports no torch (``validate`` and ``inspect`` use it)."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from tbuild.builder import LoadedSpec, load_spec
from tbuild.builder.spec import Spec

from ..errors import TbuildError
from ..files import atomic_write

SPM_FILE = "spm.model"  # a run's sentencepiece model
TOKENIZERS_FILE = "tokenizer.json"  # a run's Hugging Face tokenizers file (a model imported with one)
Record = TypeVar("Record", bound=BaseModel)  # a task's eval record type (``RunDir.evals_as``)

_STEP = re.compile(r"^step_(\d+)\.safetensors$")
_SHARDED = re.compile(r"^step_(\d+)\.dcp$")  # a sharded (FSDP) checkpoint: a directory, see training/sharded.py
TRAIN_FILE = "metrics.jsonl"  # training's metrics, one JSON line per logged step (training/metrics.py)
VALID_FILE = "valid.jsonl"  # each validation's scores


class EvalRecord(BaseModel):
    """One split's scores as ``tbuild evaluate`` keeps them (``eval_<split>.json``, flat JSON): how it
    was decoded and scored, with sacreBLEU's figures (a translation run) or EVALB's (a parsing run:
    ``params``, ``all``, ``short``, ``cutoff``, ``repairs``); a language model's: its perplexity, NLL
    and tokens, nothing decoded; a tagger's: its accuracy beside the baseline's, label perplexity, words; a
    classifier's: the same per line, and its confusion table. A task's own record (a subclass: a summarizer's
    ROUGE) keeps its fields when read back as this one (extra fields allowed).
    Fields in the order they are written."""

    model_config = ConfigDict(frozen=True, extra="allow")

    split: str
    sentences: int
    weights: str
    bleu: float | None = None
    bleu_signature: str | None = None
    bleu_lowercase: float | None = None
    bleu_lowercase_signature: str | None = None
    chrf: float | None = None
    chrf_signature: str | None = None
    params: str | None = None  # the EVALB parameter file
    all: dict | None = None  # EVALB's summary for all sentences
    short: dict | None = None  # ... for those of length <= cutoff
    cutoff: int | None = None
    repairs: dict | None = None
    accuracy: float | None = None  # a tagger's: the share of words tagged right (a classifier's: of lines)
    baseline_accuracy: float | None = None  # ... of the most frequent training tag per word (label overall)
    known: dict | None = None  # a tagger's words seen in training: words, accuracy, baseline_accuracy
    unknown: dict | None = None  # ... and those never seen in training
    confusion: dict[str, dict[str, int]] | None = None  # a classifier's: gold label -> predicted label -> lines
    perplexity: float
    nll: float | None = None  # a language model's: mean NLL per token (nats), EOS included; a tagger's per word
    tokens: int | None = None  # a language model's: the tokens scored
    seconds: float | None = None  # a language model's: the scoring's wall time
    decode_seconds: float | None = None  # a translation's or parse's decoding
    sentences_per_second: float | None = None
    beam: int | None = None
    alpha: float | None = None
    precision: str
    engine: str = "native"  # what decoded; the perplexity is always the native model's
    comparison: dict | None = None  # `tbuild evaluate --against`: each metric against the other system's outputs

    def to_json(self) -> dict:
        """The record as its file holds it: a translation's fields or a parsing run's, in order."""
        return self.model_dump(exclude_none=True)


@dataclass(frozen=True)
class RunDir:
    """The files of one training run."""

    path: Path

    @property
    def spec_file(self) -> Path:
        return self.path / "spec.yaml"  # the resolved spec (vocabulary fixed from the tokenizer)

    @property
    def tokenizer(self) -> Path:
        """spm.model; tokenizer.json where only that is there (a model imported with a tokenizers file)."""
        imported = self.path / TOKENIZERS_FILE
        return imported if imported.is_file() and not (self.path / SPM_FILE).is_file() else self.path / SPM_FILE

    def tokenizer_for(self, source: Path) -> Path:
        """Where a copy of the tokenizer ``source`` goes in this run, named for its kind: tokenizer.json for a
        tokenizers file (``.json``), else spm.model; ``tokenizer`` then finds it."""
        return self.path / (TOKENIZERS_FILE if source.suffix == ".json" else SPM_FILE)

    @property
    def best(self) -> Path:
        return self.path / "best.safetensors"  # best validation perplexity

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def lineage_file(self) -> Path:
        return self.path / "init.json"  # where a train.init run started from (finetune/start.py writes it)

    def lineage(self) -> dict | None:
        """The run's init.json (where it was started from), or None."""
        try:
            return json.loads(self.lineage_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    @property
    def decode_record(self) -> Path:
        return self.path / "decode_precision.json"  # CPU decoding measured once (decoding/precision_record.py)

    def eval_file(self, split: str) -> Path:
        return self.path / f"eval_{split}.json"  # what `tbuild evaluate` scored on the split

    def outputs_file(self, split: str, suffix: str) -> Path:
        return self.path / f"eval_{split}.{suffix}"  # the outputs `tbuild evaluate` scored, one a line

    def write_eval(self, record: EvalRecord) -> Path:
        """Keep a split's scores (``eval_<split>.json``, atomically); the file's path."""
        path = self.eval_file(record.split)
        atomic_write(path, (json.dumps(record.to_json(), indent=2) + "\n").encode())
        return path

    def read_eval(self, split: str) -> EvalRecord | None:
        """A split's scores, None if it was not evaluated (or its file is unreadable)."""
        return _read_eval(self.eval_file(split))

    def evals(self) -> list[EvalRecord]:
        """Every split's scores, in the order of their file names (unreadable files left out)."""
        records = (_read_eval(p) for p in sorted(self.path.glob("eval_*.json")))
        return [r for r in records if r is not None]

    def evals_as(self, record: type[Record]) -> list[Record]:
        """``evals()`` read as a task's record type; those it does not fit (another task's scores) left out."""
        found = []
        for scores in self.evals():
            try:
                found.append(record.model_validate(scores.to_json()))
            except ValidationError:
                continue
        return found

    def prepared(self, split: str) -> Path:
        return self.path / "prepared" / split  # memory-mapped encoded pairs (engine/data/mapped.py)

    def checkpoint(self, step: int) -> Path:
        return self.checkpoints / f"step_{step:08d}.safetensors"

    def sharded_checkpoint(self, step: int) -> Path:
        return self.checkpoints / f"step_{step:08d}.dcp"

    def step_checkpoints(self) -> list[Path]:
        """The run's periodic weights files (whole checkpoints, or the weights of a sharded one), oldest first."""
        return [p for _, p in self._found(_STEP)]

    def resume_points(self) -> list[Path]:
        """What each saved step resumes from, oldest first: its sharded checkpoint directory where there
        is one, else its file."""
        by_step = dict(self._found(_STEP))
        by_step.update(self._found(_SHARDED))
        return [by_step[step] for step in sorted(by_step)]

    def prune(self, keep_last: int) -> None:
        """Remove the files and directories of all but the newest ``keep_last`` saved steps."""
        steps = sorted({step for pattern in (_STEP, _SHARDED) for step, _ in self._found(pattern)})
        old = set(steps[:-keep_last])  # keep_last >= 1 (the schema)
        for pattern in (_STEP, _SHARDED):
            for step, path in self._found(pattern):
                if step in old:
                    shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)

    def _found(self, pattern: re.Pattern[str]) -> list[tuple[int, Path]]:
        if not self.checkpoints.is_dir():
            return []
        return sorted((int(m.group(1)), p) for p in self.checkpoints.iterdir() if (m := pattern.match(p.name)))

    def newest(self, k: int) -> list[Path]:
        """The newest ``k`` checkpoints, oldest first; an error if there are fewer."""
        paths = self.step_checkpoints()[-k:]
        if not paths:
            raise TbuildError(f"{self.path}: no checkpoints yet; train it first (`tbuild train SPEC`)")
        if len(paths) < k:
            raise TbuildError(f"{self.path}: asked for the newest {k} checkpoints but only {len(paths)} exist")
        return paths

    def write_spec(self, spec: Spec) -> None:
        """Store the resolved spec; refuse a directory that holds a run of another model."""
        if self.spec_file.exists():
            old = load_spec(self.spec_file).spec
            if old.architecture_hash() != spec.architecture_hash():
                raise TbuildError(f"{self.path} holds a run of a different model; use another output_dir "
                                  "(--set output_dir=...) or remove the directory")
        data = spec.model_dump(mode="json", exclude={"extends"})
        atomic_write(self.spec_file, yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode())


@dataclass
class Run:
    """A spec with the run directory it trains into or was trained in."""

    spec: Spec
    dir: RunDir
    checkpoint: Path | None = None  # set when the user named a checkpoint file

    @property
    def tokenizer(self) -> Path:
        """The run's sentencepiece model: the one it trained (spm.model), else the spec's
        ``data.tokenizer.model`` it was trained with."""
        given = self.spec.data.tokenizer.model
        for path in (self.dir.tokenizer, Path(given) if given else None):
            if path is not None and path.is_file():
                return path
        raise TbuildError(f"{self.dir.path}: no tokenizer ({self.dir.tokenizer.name}"
                          f"{f' or {given}' if given else ''}); has this run been trained?")


def _read_eval(path: Path) -> EvalRecord | None:
    try:
        return EvalRecord.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValidationError):
        return None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a JSON-lines file (``TRAIN_FILE``, ``VALID_FILE``); a torn last line (process killed
    mid-write) is skipped."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` is a folder tbuild trained into: its spec.yaml is a resolved spec (every
    section written out), which a hand-written spec next to other files is not."""
    try:
        data = yaml.safe_load(RunDir(path).spec_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and set(Spec.model_fields) - {"extends", "task"} <= set(data)  # task: where set


def delete_run(path: Path) -> None:
    """Delete a run directory (``tbuild train --fresh``); refuse anything else, and any folder that
    holds the working directory."""
    if not path.exists() or (path.is_dir() and all(p.name == ".lock" for p in path.iterdir())):
        shutil.rmtree(path, ignore_errors=True)  # empty, or the lock of a run that never got further
        return
    where = path.resolve()
    if where == Path.cwd().resolve() or where in Path.cwd().resolve().parents:
        raise TbuildError(f"--fresh: refusing to delete {path}: it holds the working directory")
    if not path.is_dir() or not is_run_dir(path):
        raise TbuildError(f"--fresh: refusing to delete {path}: not a tbuild run directory (no resolved spec.yaml); "
                          "set another output_dir or remove it yourself")
    shutil.rmtree(path)


def load_target(path: Path, overrides: list[str] | None = None) -> LoadedSpec:
    """A spec file as written, or the resolved spec of a run directory or of a checkpoint's run."""
    if path.suffix == ".safetensors":
        path = _run_of_checkpoint(path)
    if path.is_dir():
        spec_file = RunDir(path).spec_file
        if not spec_file.exists():
            raise TbuildError(f"{path}: not a run directory (no {spec_file.name}); train it first with "
                              "`tbuild train SPEC`")
        path = spec_file
    elif not path.exists():
        raise TbuildError(f"{path}: no such spec, run directory or checkpoint")
    return load_spec(path, overrides)


def run_dir_of(loaded: LoadedSpec) -> RunDir:
    """Where a spec trains: its ``output_dir``, else runs/<name> (relative to the working directory)."""
    spec = loaded.spec
    return RunDir(Path(spec.output_dir) if spec.output_dir else Path("runs") / loaded.name)


def resolve_run(path: Path, overrides: list[str] | None = None) -> Run:
    """The trained run that a spec file, run directory or checkpoint file names. A spec file stands
    for its run directory, whose resolved spec is what was trained."""
    checkpoint = path if path.suffix == ".safetensors" else None
    if checkpoint is not None and not checkpoint.exists():
        raise TbuildError(f"{checkpoint}: checkpoint not found")
    if checkpoint is not None or path.is_dir():
        folder = _run_of_checkpoint(path) if checkpoint is not None else path
        return Run(load_target(folder, overrides).spec, RunDir(folder), checkpoint)
    loaded = load_target(path, overrides)
    run = run_dir_of(loaded)
    if run.spec_file.exists():
        return Run(load_spec(run.spec_file, overrides).spec, run)
    return Run(loaded.spec, run)


def _run_of_checkpoint(path: Path) -> Path:
    return path.parent.parent if path.parent.name == "checkpoints" else path.parent

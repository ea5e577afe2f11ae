"""A task declared in one module (this one) is trained, evaluated, decoded and served with no edit
elsewhere: ``tbuild train``, ``evaluate`` and ``decode`` through the CLI and the server through FastAPI's
TestClient, each asking the run's task. The toy task reverses a sequence of words: its data set writes
its own split files, its evaluation reports the share of sequences reversed exactly, its decoding writes
each output after ``=>``. Its data set and task are registered for this module's tests only."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.builder.spec import DATASETS, DatasetSpec, DataSpec, Spec
from tbuild.builder.spec.tasks import TaskDeclaration, declare, undeclare
from tbuild.cli.app import app
from tbuild.engine.data.corpus import split_files
from tbuild.engine.data.datasets import read_split
from tbuild.engine.data.joined import for_model
from tbuild.engine.data.pairs import load_pairs
from tbuild.engine.decoding.native import NativeEngine, decode_lines, load_native_engine
from tbuild.engine.decoding.request import DecodeRequest
from tbuild.engine.loss import evaluate_loss
from tbuild.engine.run.directory import EvalRecord, Run, resolve_run
from tbuild.engine.tasks import registry
from tbuild.engine.tasks.base import DecodeCall, EvalCall, Loading, Log, Report, Task, scores_table
from tbuild.engine.tasks.registry import register_task, task_of
from tbuild.engine.tasks.translation import pairs_data

if TYPE_CHECKING:
    from tbuild.engine.data.batches import BatchSource
    from tbuild.engine.data.tokenizer import Tokenizer
    from tbuild.engine.run.directory import RunDir
    from tbuild.engine.serving.endpoints import Endpoint

WORDS = ("ab", "cd", "ef", "gh", "ij", "kl", "mn", "op", "qr", "st", "uv", "wx")
CALLS: list[str] = []  # what the commands asked of the toy task, in order


class ReverseDataset(DatasetSpec):
    """Sequences of 2 to 5 words and the same words reversed, written at each split's prefix."""

    kind: Literal["reverse"] = "reverse"
    sequences: int = 200


class ReverseFiles:
    """The reverse data set's provider: writes PREFIX.<source_lang> and PREFIX.<target_lang> when missing."""

    def __init__(self, spec: ReverseDataset, *, mirror: Path | None = None, progress: bool | None = None) -> None:
        self.spec = spec

    def ensure(self, data: DataSpec, log: Log, splits: Sequence[str] = ("train", "valid", "test")) -> None:
        for n, split in enumerate(splits):
            if getattr(data, split) is None:
                continue
            source, target = split_files(data, split)
            if source.is_file() and target.is_file():
                continue
            rng = random.Random(n)
            lines = [[rng.choice(WORDS) for _ in range(rng.randint(2, 5))] for _ in range(self.spec.sequences)]
            source.write_text("".join(" ".join(w) + "\n" for w in lines))
            target.write_text("".join(" ".join(reversed(w)) + "\n" for w in lines))


REVERSAL = TaskDeclaration("reversal", __name__, datasets=("reverse",))  # a run of the reverse data set is its


class Reversal(Task):
    """Words → the same words reversed, by an encoder-decoder."""

    name = "reversal"
    what = "a reverser"

    def training_data(self, spec: Spec, tokenizer: Tokenizer, run: RunDir, log: Log
                      ) -> tuple[BatchSource, BatchSource | None]:
        CALLS.append("training_data")
        return pairs_data(spec, tokenizer, run, log)

    def evaluate(self, runs: list[Run], call: EvalCall) -> Report:
        CALLS.append("evaluate")
        run, spec = runs[0], runs[0].spec
        sources, references = read_split(spec.data, call.split, call.notify)
        t = load_native_engine(run, checkpoint=call.loading.checkpoint, device=call.loading.device)
        outputs = reversed_lines(t, spec, sources)
        exact = sum(o == r for o, r in zip(outputs, references, strict=True)) / len(references)
        pairs = for_model(spec, load_pairs(spec, call.split, t.tokenizer, call.notify))
        ppl = evaluate_loss(t.model, pairs, batch_tokens=spec.train.batch_tokens,
                            label_smoothing=spec.train.label_smoothing, policy=t.policy,
                            special=t.tokenizer.special)["ppl"]
        record = EvalRecord(split=call.split, sentences=len(sources), weights=t.weights, accuracy=exact,
                            perplexity=ppl, precision=t.precision)
        table = scores_table(f"{spec.name} on {call.split}")
        table.add("exact", f"{100 * exact:.2f}", "% of sequences reversed exactly")
        table.add("perplexity", f"{ppl:.2f}", "per target piece")
        return [table, f"wrote {run.dir.write_eval(record)}"]

    def decode(self, runs: list[Run], call: DecodeCall) -> list[str]:
        CALLS.append("decode")
        lines = decode_lines(call.read(), call.name)
        t = load_native_engine(runs[0], checkpoint=call.loading.checkpoint, device=call.loading.device)
        return [f"{line} => {out}" for line, out in zip(lines, reversed_lines(t, runs[0].spec, lines), strict=True)]

    def serve(self, run: Run, batch_tokens: int, loading: Loading, notify: Log) -> Endpoint:
        from tbuild.engine.serving.endpoints import Translation

        CALLS.append("serve")
        translator = load_native_engine(run, checkpoint=loading.checkpoint, device=loading.device)
        return Translation(translator, run.spec, batch_tokens, 64)


def reversed_lines(translator: NativeEngine, spec: Spec, lines: list[str]) -> list[str]:
    """The model's greedy output for each line."""
    results = translator.translate(lines, DecodeRequest.of(spec.decode, beam=1))
    return [translator.tokenizer.decode(h[0].tokens) if h else "" for h in results]


@pytest.fixture(scope="module")
def declared() -> Iterator[None]:
    """The reverse data set and the reversal task (its declaration and its class), registered while this
    module's tests run."""
    DATASETS.register(ReverseDataset)(ReverseFiles)
    declare(REVERSAL)
    register_task(Reversal)
    try:
        yield
    finally:
        registry.TASKS.pop(Reversal.name)
        undeclare(REVERSAL.name)
        DATASETS._specs.pop("reverse")
        DATASETS._blocks.pop("reverse")
        DATASETS.generation += 1


@pytest.fixture(scope="module")
def trained(declared: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("reverse")
    spec = {
        "name": "reverse",
        "output_dir": str(root / "run"),
        "model": {"d_model": 32, "encoder": {"layers": 1, "heads": 2, "d_ff": 64},
                  "decoder": {"layers": 1, "heads": 2, "d_ff": 64}, "dropout": {"residual": 0.0, "embedding": 0.0}},
        "data": {"dataset": {"kind": "reverse"}, "source_lang": "src", "target_lang": "tgt",
                 "train": str(root / "train"), "valid": str(root / "valid"), "test": str(root / "test"),
                 "tokenizer": {"vocab_size": 16, "target_tokens": "whole"}},
        "train": {"batch_tokens": 600, "max_steps": 40, "log_every": 10, "validate_every": 20,
                  "checkpoint_every": 20, "checkpoint_minutes": None, "precision": "fp32",
                  "schedule": {"kind": "inverse_sqrt", "lr": 3e-3, "warmup": 10}},
        "decode": {"beam": 1, "max_len_a": 1.0, "max_len_b": 2},
    }
    (root / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = CliRunner().invoke(app, ["train", str(root / "spec.yaml")])
    assert result.exit_code == 0, result.output
    return root / "run"


def test_a_spec_resolves_to_the_task_that_claims_its_data_set(declared: None) -> None:
    spec = Spec.model_validate({"data": {"dataset": {"kind": "reverse"}}})
    assert isinstance(task_of(spec), Reversal)
    assert task_of(Spec()).name == "translation"


def test_a_spec_can_name_the_task_declared_in_process(declared: None) -> None:
    """Validation knows a task declared in-process: ``task: reversal`` is taken, and names the run's task."""
    spec = Spec.model_validate({"task": "reversal"})
    assert isinstance(task_of(spec), Reversal) and spec.model_dump()["task"] == "reversal"


def test_the_toy_task_trains_evaluates_decodes_and_serves(trained: Path) -> None:
    from fastapi.testclient import TestClient

    from tbuild.engine.serving.app import create_app
    from tbuild.engine.tasks.service import open_service

    assert "training_data" in CALLS and (trained / "best.safetensors").is_file()
    result = CliRunner().invoke(app, ["evaluate", str(trained)])
    assert result.exit_code == 0, result.output
    assert "% of sequences reversed exactly" in result.output
    record = json.loads((trained / "eval_test.json").read_text())
    assert 0.0 <= record["accuracy"] <= 1.0 and record["sentences"] == 200

    lines = ["ab cd ef", "kl ij"]
    result = CliRunner().invoke(app, ["decode", str(trained)], input="".join(f"{line}\n" for line in lines))
    assert result.exit_code == 0, result.output
    decoded = result.stdout.splitlines()
    assert [d.split(" => ")[0] for d in decoded] == lines

    service = open_service(resolve_run(trained), max_wait_ms=5)
    try:
        with TestClient(create_app(service)) as client:
            answer = client.post("/translate", json={"src": lines})
    finally:
        service.close()
    assert answer.status_code == 200, answer.text
    assert answer.json()["translations"] == [d.split(" => ")[1] for d in decoded]
    assert CALLS == ["training_data", "evaluate", "decode", "serve"]

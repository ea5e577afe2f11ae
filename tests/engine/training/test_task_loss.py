"""The trainer takes a step's loss and the validation loss pass from the run's task (``Task.loss``,
``Task.valid_loss``): a tiny translation model's and a tiny tagger's first steps and validation against the
label-smoothed cross entropy computed here by its definition (§5.4) on the model as it was before each step;
a task that overrides ``loss`` alone trains by its own loss; a metric the loss pass does not give is refused
in one line."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from tbuild.builder import load_spec
from tbuild.engine.data.batches import IGNORED, collate
from tbuild.engine.data.word_labels import LABEL_OFFSET, NO_LABEL
from tbuild.engine.device.policy import choose_policy
from tbuild.engine.errors import TbuildError
from tbuild.engine.run.directory import run_dir_of
from tbuild.engine.tasks.base import Task
from tbuild.engine.tasks.translation import Translation
from tbuild.engine.training.run import open_trainer, prepare_inputs
from tbuild.engine.training.trainer import Trainer
from tests.cli.toy_tagger import TRAIN, tagger_spec
from tests.conftest import tiny_train_spec

NO_DROPOUT = {"residual": 0.0, "embedding": 0.0}  # every pass of a batch gives the same logits


def scored(tgt_out: torch.Tensor, labels: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The positions that carry a loss and their classes: every target position of a row (not ``IGNORED`` past
    its length); a tagger's, only those with a label (not ``NO_LABEL``), class j stored as j + ``LABEL_OFFSET``."""
    keep = tgt_out.ne(IGNORED)
    if not labels:
        return keep, tgt_out[keep]
    keep &= tgt_out.ne(NO_LABEL)
    return keep, tgt_out[keep] - LABEL_OFFSET


def by_definition(model: nn.Module, tensors: tuple[torch.Tensor, ...], *, eps: float, labels: bool
                  ) -> tuple[float, float, int, int]:
    """(label-smoothed loss sum, NLL sum, positions scored, positions whose best class is right) of one batch:
    the cross entropy against (1 - ε)·one_hot + ε/V, in float64."""
    src, tgt_in, tgt_out, *padding = tensors
    with torch.no_grad():
        logp = model(src, tgt_in, *padding).double().log_softmax(-1)
    keep, classes = scored(tgt_out, labels)
    rows = logp[keep]  # (N, V)
    nll = -rows[torch.arange(len(classes)), classes]
    q = torch.full_like(rows, eps / rows.size(-1))
    q[torch.arange(len(classes)), classes] += 1.0 - eps
    loss = -(q * rows).sum()
    return float(loss), float(nll.sum()), len(classes), int(rows.argmax(-1).eq(classes).sum())


def train_checked(trainer: Trainer, steps: int, definition: Callable[[nn.Module, tuple[torch.Tensor, ...]],
                                                                   tuple[float, ...]]) -> None:
    """``steps`` updates, each one's loss and NLL (summed over its batches) against ``definition``'s (loss sum, NLL
    sum) on the model before the update and the batches the update took."""
    taken: list[Any] = []
    real = trainer.feed.next

    def next_batch() -> Any:
        taken.append(real())
        return taken[-1]

    trainer.feed.next = next_batch  # type: ignore[method-assign]
    for _ in range(steps):
        before, taken[:] = copy.deepcopy(trainer.model), []
        stats = trainer.step()
        want = [definition(before, fed.tensors) for fed in taken]
        assert float(stats["loss"]) == pytest.approx(sum(w[0] for w in want), rel=1e-5)
        assert float(stats["nll"]) == pytest.approx(sum(w[1] for w in want), rel=1e-5)


def valid_checked(trainer: Trainer, records: list[dict], labels: bool) -> dict:
    """Validate, and hold its record against the definition over each validation pair on its own."""
    pairs, special = trainer.valid_pairs, trainer.spec.special()
    assert pairs is not None
    trainer.model.eval()
    sums = np.zeros(4)
    for i in range(len(pairs)):
        sums += by_definition(trainer.model, collate(pairs, [i], special), eps=trainer.cfg.label_smoothing,
                              labels=labels)
    trainer.validate()
    loss, nll, n, right = sums
    record = records[-1]
    assert record["tokens"] == n
    assert record["loss"] == pytest.approx(loss / n, rel=1e-5) and record["nll"] == pytest.approx(nll / n, rel=1e-5)
    assert record["ppl"] == pytest.approx(math.exp(nll / n), rel=1e-5)
    if labels:
        assert record["accuracy"] == pytest.approx(right / n) and record["score"] == record["accuracy"]
    else:
        assert "accuracy" not in record and record["score"] == record["ppl"]
    return record


def opened(spec: dict, records: list[dict], task: Task | None = None) -> Trainer:
    """A trainer of ``spec`` (its run's own task, or ``task``), its validation records kept in ``records``."""
    def emit(kind: str, data: dict) -> None:
        if kind == "valid":
            records.append(data)

    loaded, policy = load_spec(spec), choose_policy("fp32")
    if task is None:
        return open_trainer(loaded, emit, policy=policy)
    run = run_dir_of(loaded)
    return Trainer(replace(prepare_inputs(loaded, run, emit), task=task), run, emit, policy=policy)


def test_a_translation_models_steps_and_validation_are_the_label_smoothed_loss(tiny_corpus: Path,
                                                                               tmp_path: Path) -> None:
    spec = tiny_train_spec(tiny_corpus, tmp_path / "run", update_freq=2)
    spec["model"]["dropout"] = NO_DROPOUT
    records: list[dict] = []
    trainer = opened(spec, records)
    try:
        train_checked(trainer, 3, partial(by_definition, eps=trainer.cfg.label_smoothing, labels=False))
        valid_checked(trainer, records, labels=False)
    finally:
        trainer.close()


def test_a_taggers_steps_and_validation_are_the_loss_at_its_labelled_positions(tmp_path: Path) -> None:
    """Class j is stored as j + 1 and a word's other pieces carry NO_LABEL: the loss is the cross entropy over
    the labels at the labelled positions only, and validation scores their accuracy."""
    for split in ("train", "valid"):
        (tmp_path / f"{split}.words").write_text(TRAIN[0])
        (tmp_path / f"{split}.tags").write_text(TRAIN[1])
    spec = tagger_spec(str(tmp_path / "train"), str(tmp_path / "valid"), label_smoothing=0.2)
    spec["output_dir"], spec["model"]["dropout"] = str(tmp_path / "run"), NO_DROPOUT
    records: list[dict] = []
    trainer = opened(spec, records)
    try:
        train_checked(trainer, 3, partial(by_definition, eps=trainer.cfg.label_smoothing, labels=True))
        record = valid_checked(trainer, records, labels=True)
    finally:
        trainer.close()
    assert record["metric"] == "accuracy"


class Brier(Translation):
    """A translation trained by another loss: the squared error of the target's probability, Σ (1 - p_y)²."""

    def loss(self, model: nn.Module, batch: Any, spec: Any, policy: Any, precision: Any = None
             ) -> tuple[torch.Tensor, torch.Tensor]:
        src, tgt_in, tgt_out, *padding = batch
        logp = model(src, tgt_in, *padding).float().log_softmax(-1)
        keep = tgt_out.ne(IGNORED)
        target = logp[keep].gather(-1, tgt_out[keep][:, None]).squeeze(-1)
        return (1 - target.exp()).square().sum(), -target.detach().sum()


def brier(model: nn.Module, tensors: tuple[torch.Tensor, ...]) -> tuple[float, float]:
    """(Σ (1 - p_y)², NLL sum) of a batch, in float64."""
    src, tgt_in, tgt_out, *padding = tensors
    with torch.no_grad():
        p = model(src, tgt_in, *padding).double().softmax(-1)
    keep = tgt_out.ne(IGNORED)
    p_target = p[keep].gather(-1, tgt_out[keep][:, None]).squeeze(-1)
    return float((1 - p_target).square().sum()), float(-p_target.log().sum())


def test_a_task_that_overrides_its_loss_alone_trains_by_it(tiny_corpus: Path, tmp_path: Path) -> None:
    spec = tiny_train_spec(tiny_corpus, tmp_path / "run")
    spec["model"]["dropout"] = NO_DROPOUT
    records: list[dict] = []
    trainer = opened(spec, records, Brier())
    try:
        train_checked(trainer, 2, brier)
        valid_checked(trainer, records, labels=False)  # its validation: the label-smoothed loss, not overridden
    finally:
        trainer.close()


def test_a_metric_the_loss_pass_does_not_give_is_refused_in_one_line() -> None:
    spec = SimpleNamespace(train=SimpleNamespace(select=SimpleNamespace(metric="accuracy")))
    with pytest.raises(TbuildError, match=r"^train\.select\.metric accuracy is not scored by a run's validation "
                                          r"\(it gives loss, nll, ppl\)$"):
        Task().valid_score(spec, {"loss": 1.0, "nll": 1.0, "ppl": 2.7})  # type: ignore[arg-type]

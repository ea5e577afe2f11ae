"""The one weights loader: every path (named, averaged, best, newest) checks the weights fit."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tbuild.builder import build_model
from tbuild.engine.errors import CheckpointError
from tbuild.engine.run.checkpoint import read_checkpoint, save_weights
from tbuild.engine.run.directory import RunDir, resolve_run
from tbuild.engine.run.weights import load_weights


def test_default_named_and_averaged_weights(tiny_run: Path) -> None:
    run = resolve_run(tiny_run)
    model = build_model(run.spec)
    assert load_weights(model, run) == "best.safetensors"
    newest = RunDir(tiny_run).step_checkpoints()[-1]
    assert load_weights(model, run, checkpoint=newest) == newest.name
    assert torch.equal(model.output.weight, read_checkpoint(newest)[0]["model.src_embed.tokens.weight"])
    assert load_weights(model, run, average=2).startswith("average of step_00000020")


def test_averaging_refuses_weights_that_do_not_fit(tiny_run: Path, tmp_path: Path) -> None:
    """The average of checkpoints with a stray tensor must not load silently (it used strict=False)."""
    run = resolve_run(tiny_run)
    copy = RunDir(tmp_path / "copy")
    for path in RunDir(tiny_run).newest(2):
        tensors, meta = read_checkpoint(path)
        tensors["model.stray.weight"] = torch.zeros(3)
        save_weights(copy.checkpoints / path.name, tensors, meta)
    run.dir = copy
    with pytest.raises(CheckpointError, match=r"weights do not fit the model .*unexpected \['stray.weight'\]"):
        load_weights(build_model(run.spec), run, average=2)


def test_weights_of_another_model_are_refused(tiny_run: Path) -> None:
    run = resolve_run(tiny_run, ["model.d_model=64"])
    with pytest.raises(CheckpointError, match="checkpoint is of another model"):
        load_weights(build_model(run.spec), run)

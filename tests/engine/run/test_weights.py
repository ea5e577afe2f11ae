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


def test_the_model_alone_is_read_from_a_training_checkpoint(tiny_run: Path, tmp_path: Path) -> None:
    """``model_only`` reads the model's tensors (the same values) and the metadata, not the optimizer's; a
    truncated or missing file is a CheckpointError naming it, wherever it is cut."""
    newest = RunDir(tiny_run).step_checkpoints()[-1]
    full, meta = read_checkpoint(newest)
    model, model_meta = read_checkpoint(newest, model_only=True)
    assert any(k.startswith("optim.") for k in full) and model_meta == meta
    assert model.keys() == {k for k in full if k.startswith("model.")}
    assert all(torch.equal(model[k], full[k]) for k in model)
    data, cut = newest.read_bytes(), tmp_path / "cut.safetensors"
    for size in (4, 100, len(data) // 2, len(data) - 1):
        cut.write_bytes(data[:size])
        with pytest.raises(CheckpointError, match="cut.safetensors: not a readable tbuild checkpoint"):
            read_checkpoint(cut, model_only=True)
    with pytest.raises(CheckpointError, match="checkpoint not found"):
        read_checkpoint(tmp_path / "gone.safetensors", model_only=True)

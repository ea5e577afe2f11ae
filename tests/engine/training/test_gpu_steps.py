"""On a CUDA GPU a training step never waits for the device: after warm-up, steps run under
torch.cuda.set_sync_debug_mode("error"), which raises at any host synchronisation. Skipped without CUDA."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tbuild.builder import load_spec
from tbuild.engine.device.policy import choose_policy
from tbuild.engine.training.run import open_trainer
from tests.conftest import tiny_train_spec

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("compiled", [False, True])
def test_steps_do_not_synchronise_with_the_gpu(tiny_corpus: Path, tmp_path: Path, compiled: bool) -> None:
    spec = tiny_train_spec(tiny_corpus, tmp_path / "run", max_steps=20, compile=compiled, precision="auto")
    trainer = open_trainer(load_spec(spec), lambda kind, data: None, policy=choose_policy("auto", "cuda"))
    try:
        for _ in range(3):  # warm-up: compilation, allocator, kernel plans
            trainer.step()
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            for _ in range(4):
                trainer.step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize()
    finally:
        trainer.close()

"""What needs a newer torch than pyproject's minimum stays out of the way: one-process training never
imports torch.distributed.checkpoint (its safetensors storage, hf_storage, is torch >= 2.9), and
sharded (FSDP) checkpoints refuse an older torch in one line."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from tbuild.engine.errors import CheckpointError
from tbuild.engine.training import sharded
from tests.conftest import tiny_train_spec

WORDS = {  # word i of one language translates word i of the other
    "en": ("a", "man", "woman", "dog", "cat", "runs", "sits", "eats", "red", "blue", "big", "small", "on", "park"),
    "de": ("ein", "Mann", "Frau", "Hund", "Katze", "läuft", "sitzt", "isst", "rot", "blau", "groß", "klein", "auf",
           "Park"),
}


def synthetic_corpus(folder: Path, lines: int = 300) -> Path:
    """train/val/test files of random word-for-word English-German pairs (no download needed)."""
    rng = random.Random(0)
    for split, n in (("train", lines), ("val", 20), ("test", 10)):
        rows = [[rng.randrange(len(WORDS["en"])) for _ in range(rng.randint(3, 9))] for _ in range(n)]
        for lang, words in WORDS.items():
            (folder / f"{split}.{lang}").write_text("".join(" ".join(words[i] for i in row) + "\n" for row in rows))
    return folder


def test_one_process_training_imports_no_distributed_checkpoint(tmp_path: Path) -> None:
    spec = tiny_train_spec(synthetic_corpus(tmp_path), tmp_path / "run", max_steps=2, validate_every=2,
                           checkpoint_every=2)
    spec["data"]["tokenizer"]["vocab_size"] = 60
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    code = ("import sys; from typer.testing import CliRunner; from tbuild.cli.app import app; "
            f"r = CliRunner().invoke(app, ['train', {str(tmp_path / 'spec.yaml')!r}]); "
            "assert r.exit_code == 0, r.output; "
            "loaded = sorted(m for m in sys.modules if m.startswith('torch.distributed.checkpoint')); "
            "assert not loaded, f'imported {loaded}'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "run" / "checkpoints" / "step_00000002.safetensors").is_file()


def test_sharded_checkpoints_refuse_an_old_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch, "__version__", torch.torch_version.TorchVersion("2.9.0"))
    sharded.require_torch()
    monkeypatch.setattr(torch, "__version__", torch.torch_version.TorchVersion("2.6.0+cpu"))
    with pytest.raises(CheckpointError) as info:
        sharded.require_torch()
    assert str(info.value) == ("sharded (FSDP) checkpoints need torch >= 2.9, this is torch 2.6.0+cpu: upgrade "
                               "torch, or train with distributed.strategy: ddp")

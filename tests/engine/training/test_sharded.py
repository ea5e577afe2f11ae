"""The checks a sharded (FSDP) checkpoint directory passes before DCP reads it (no process group needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tbuild.engine.errors import CheckpointError
from tbuild.engine.training.sharded import META, read_meta


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "step_00000003.dcp"
    folder.mkdir()
    for rank in (1, 2):
        (folder / f"shard-0000{rank}-model-00001-of-00001.safetensors").write_bytes(b"0123456789")
    shards = {p.name: 10 for p in folder.iterdir()}
    (folder / META).write_text(json.dumps({"step": 3, "architecture": "abc", "shards": shards, "rng_torch": "00ff"}))
    return folder


def test_a_whole_directory_passes(tmp_path: Path) -> None:
    assert read_meta(_folder(tmp_path), "abc")["step"] == 3


@pytest.mark.parametrize(("damage", "message"), [
    (lambda f: (f / META).unlink(), "incomplete sharded checkpoint (tbuild.json missing)"),
    (lambda f: (f / META).write_text("{"), "not a readable sharded checkpoint"),
    (lambda f: (f / META).write_text("{}"), "not a readable sharded checkpoint"),
    (lambda f: (f / META).write_text('{"shards": [], "rng_torch": ""}'), "not a readable sharded checkpoint"),
    (lambda f: next(f.glob("shard-00002*")).unlink(), "incomplete sharded checkpoint (shard-00002"),
    (lambda f: next(f.glob("shard-00002*")).write_bytes(b"01234"), "truncated, changed or unexpected: shard-00002"),
    (lambda f: (f / "shard-00003-model-00001-of-00001.safetensors").write_bytes(b""), "unexpected: shard-00003"),
])
def test_damage_is_one_checkpoint_error(tmp_path: Path, damage, message: str) -> None:
    folder = _folder(tmp_path)
    damage(folder)
    with pytest.raises(CheckpointError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_meta(folder)


def test_another_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="checkpoint is of another model"):
        read_meta(_folder(tmp_path), "xyz")

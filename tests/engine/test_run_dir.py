"""One resolution of what a user names: a spec file, a run directory or a checkpoint file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tbuild.engine.errors import TbuildError
from tbuild.engine.run_dir import RunDir, load_target, resolve_run


def test_spec_run_directory_and_checkpoint_name_the_same_run(tiny_run: Path) -> None:
    checkpoint = RunDir(tiny_run).step_checkpoints()[0]
    spec_file = tiny_run.parent / "spec.yaml"
    runs = [resolve_run(p) for p in (spec_file, tiny_run, checkpoint)]
    assert {r.dir.path.resolve() for r in runs} == {tiny_run.resolve()}
    assert {r.spec.architecture_hash() for r in runs} == {runs[1].spec.architecture_hash()}
    assert runs[1].spec.model.vocab_size == 200  # the resolved spec, not from_tokenizer
    assert runs[2].checkpoint == checkpoint and runs[0].checkpoint is None
    assert load_target(tiny_run).spec == load_target(checkpoint).spec == runs[1].spec
    assert load_target(spec_file).spec.model.vocab_size == "from_tokenizer"  # the file as written


def test_unknown_targets(tmp_path: Path) -> None:
    with pytest.raises(TbuildError, match="not a run directory"):
        load_target(tmp_path)
    with pytest.raises(TbuildError, match="no such spec, run directory or checkpoint"):
        load_target(tmp_path / "nothing.yaml")
    with pytest.raises(TbuildError, match="checkpoint not found"):
        resolve_run(tmp_path / "step_1.safetensors")


def test_newest_checkpoints(tiny_run: Path) -> None:
    run = RunDir(tiny_run)
    assert [p.name for p in run.newest(2)] == ["step_00000020.safetensors", "step_00000030.safetensors"]
    with pytest.raises(TbuildError, match="asked for the newest 9 checkpoints but only 3 exist"):
        run.newest(9)


def test_resume_points_prefer_sharded_directories_and_prune_keeps_whole_steps(tmp_path: Path) -> None:
    """A step with a sharded (FSDP) directory resumes from it, not from its weights-only file; pruning
    removes old steps' files and directories together; temporary directories are not checkpoints."""
    run = RunDir(tmp_path)
    run.checkpoints.mkdir()
    for step in (1, 2, 3, 4):
        run.checkpoint(step).write_bytes(b"x")
    for step in (2, 4, 5):
        run.sharded_checkpoint(step).mkdir()
    (run.checkpoints / "step_00000006.dcp.tmp").mkdir()
    assert [p.name for p in run.resume_points()] == ["step_00000001.safetensors", "step_00000002.dcp",
                                                     "step_00000003.safetensors", "step_00000004.dcp",
                                                     "step_00000005.dcp"]
    assert [p.name for p in run.step_checkpoints()] == [f"step_0000000{i}.safetensors" for i in (1, 2, 3, 4)]
    run.prune(2)
    assert sorted(p.name for p in run.checkpoints.iterdir()) == [
        "step_00000004.dcp", "step_00000004.safetensors", "step_00000005.dcp", "step_00000006.dcp.tmp"]

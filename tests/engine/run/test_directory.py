"""One resolution of what a user names: a spec file, a run directory or a checkpoint file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tbuild.engine.errors import TbuildError
from tbuild.engine.run.directory import EvalRecord, RunDir, load_target, resolve_run


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


def _translation() -> dict:
    """A translation's eval_test.json as `tbuild evaluate` has always written it (keys in this order)."""
    return {"split": "test", "sentences": 3, "weights": "best.safetensors", "bleu": 12.5,
            "bleu_signature": "nrefs:1|bleu", "bleu_lowercase": 13.0, "bleu_lowercase_signature": "nrefs:1|lc",
            "chrf": 40.25, "chrf_signature": "chrF2", "perplexity": 9.5, "decode_seconds": 1.5,
            "sentences_per_second": 2.0, "beam": 4, "alpha": 0.6, "precision": "fp32", "engine": "native"}


def _parsing() -> dict:
    """A parsing run's eval_src.json as `tbuild evaluate` has always written it."""
    return {"split": "src", "sentences": 2, "weights": "best.safetensors", "params": "COLLINS.prm",
            "all": {"f1": 80.0, "sentences": 2}, "short": {"f1": 81.0, "sentences": 2}, "cutoff": 40,
            "repairs": {"outputs": 2, "repaired": 1}, "perplexity": 7.5, "decode_seconds": 0.5,
            "sentences_per_second": 4.0, "beam": 4, "alpha": 0.6, "precision": "fp32", "engine": "ct2"}


@pytest.mark.parametrize("written", [_translation, _parsing])
def test_eval_records_keep_the_files_layout(tmp_path: Path, written) -> None:  # noqa: ANN001
    """eval_<split>.json through RunDir: a translation's and a parsing run's record are written byte for
    byte as `tbuild evaluate` wrote them, and such a file reads back as the record."""
    data = written()
    run = RunDir(tmp_path)
    path = run.write_eval(EvalRecord(**data))
    assert path == run.eval_file(data["split"]) == tmp_path / f"eval_{data['split']}.json"
    assert path.read_text() == json.dumps(data, indent=2) + "\n"
    assert run.read_eval(data["split"]) == EvalRecord(**data) and run.evals() == [EvalRecord(**data)]


def test_eval_records_list_every_split_and_skip_unreadable_files(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.write_eval(EvalRecord(**_translation()))
    run.write_eval(EvalRecord(**{**_translation(), "split": "valid", "future_field": 1}))
    (tmp_path / "eval_broken.json").write_text("{")
    (tmp_path / "eval_other.json").write_text('{"split": "x"}')
    assert [e.split for e in run.evals()] == ["test", "valid"]
    assert run.read_eval("broken") is None and run.read_eval("missing") is None
    assert run.read_eval("test").bleu == 12.5 and run.read_eval("test").engine == "native"

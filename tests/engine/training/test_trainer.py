"""Training: the §5.3 schedule, label smoothing, checkpoints, exact resume, averaging."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from tbuild.builder import build_model, load_spec
from tbuild.engine.errors import CheckpointError, TbuildError
from tbuild.engine.run.checkpoint import average_checkpoints, load_into, read_checkpoint
from tbuild.engine.run.directory import RunDir, read_jsonl
from tbuild.engine.training.run import train_spec as train
from tests.conftest import tiny_train_spec


def quiet(kind: str, data: dict) -> None:
    pass


def _train(spec: dict, **kw: object) -> dict:
    return train(load_spec(spec), quiet, **kw)


@pytest.mark.parametrize("ahead", [0, 2])
def test_resume_matches_straight_run(tiny_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     ahead: int) -> None:
    """2N steps straight == N steps, stop, resume for N more: the loss curves agree to 1e-6; also with
    batches collated ahead on a worker thread (as on CUDA), whose cursor runs ahead of the saved position."""
    from tbuild.engine.device.policy import Policy

    monkeypatch.setattr(Policy, "feed_ahead", property(lambda self: ahead))
    straight = tmp_path / "straight"
    _train(tiny_train_spec(tiny_corpus, straight, max_steps=8, checkpoint_every=4))
    split = tmp_path / "split"
    _train(tiny_train_spec(tiny_corpus, split, max_steps=4, checkpoint_every=4))
    result = _train(tiny_train_spec(tiny_corpus, split, max_steps=8, checkpoint_every=4))
    assert result["step"] == 8
    _same_training(straight, split, 8)


def _same_training(straight: Path, split: Path, steps: int) -> list[dict]:
    """The two runs' loss curves agree to 1e-6 at every step and their last weights to 1e-6; the records."""
    a, b = read_jsonl(straight / "metrics.jsonl"), read_jsonl(split / "metrics.jsonl")
    assert [r["step"] for r in a] == [r["step"] for r in b] == list(range(1, steps + 1))
    for ra, rb in zip(a, b, strict=True):
        assert ra["epoch"] == rb["epoch"]
        assert abs(ra["loss"] - rb["loss"]) <= 1e-6 and abs(ra["nll"] - rb["nll"]) <= 1e-6
    wa, _ = read_checkpoint(RunDir(straight).step_checkpoints()[-1])
    wb, _ = read_checkpoint(RunDir(split).step_checkpoints()[-1])
    for k in wa:
        if k.startswith("model."):
            torch.testing.assert_close(wa[k], wb[k], atol=1e-6, rtol=0)
    return a


def test_resume_with_sampled_variants_matches_straight_run(tiny_corpus: Path, tmp_path: Path) -> None:
    """data.tokenizer.sampling: 16 steps straight == 5, stop, 11 more, over three epochs of two sampled variants
    (epoch e reads variant e mod 2, its batches cut from that variant's lengths): the resumed run lands on the
    same batch at (epoch, index), across the epoch boundaries and the return to the first variant."""
    def spec(run: Path, steps: int) -> dict:
        out = tiny_train_spec(tiny_corpus, run, max_steps=steps, checkpoint_every=5, batch_tokens=3000,
                              validate_every=100)
        out["data"]["tokenizer"]["sampling"] = {"alpha": 0.1, "variants": 2}
        return out

    _train(spec(tmp_path / "straight", 16))
    _train(spec(tmp_path / "split", 5))
    assert _train(spec(tmp_path / "split", 16))["step"] == 16
    records = _same_training(tmp_path / "straight", tmp_path / "split", 16)
    assert records[-1]["epoch"] >= 3  # both variants read, and the first again
    header = json.loads((tmp_path / "split" / "prepared" / "train" / "header.json").read_text())
    assert len(header["variants"]) == 2 and header["sampling"]["variants"] == 2


def test_run_directory_contents(tiny_corpus: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = _train(tiny_train_spec(tiny_corpus, run))
    assert result["reason"] == "max_steps" and result["step"] == 6
    names = {p.name for p in RunDir(run).step_checkpoints()}
    assert names == {"step_00000003.safetensors", "step_00000006.safetensors"}
    assert (run / "spm.model").exists() and (run / "best.safetensors").exists()
    spec = yaml.safe_load((run / "spec.yaml").read_text())
    assert spec["model"]["vocab_size"] == 200
    records = read_jsonl(run / "metrics.jsonl")
    assert set(records[0]) >= {"step", "epoch", "loss", "nll", "ppl", "lr", "tokens_per_s", "grad_norm", "elapsed"}
    valid = read_jsonl(run / "valid.jsonl")
    assert [r["step"] for r in valid] == [3, 6] and all(r["ppl"] > 1 for r in valid)
    # checkpoints hold no pickles: safetensors with JSON metadata
    _, meta = read_checkpoint(RunDir(run).step_checkpoints()[-1])
    assert meta["step"] == 6 and "optim_groups" in meta
    assert "spec_hash" not in meta and "python_rng" in meta  # the architecture hash is stored once


def test_explicit_vocabulary_may_exceed_the_tokenizer(tiny_corpus: Path, tmp_path: Path) -> None:
    """An explicit vocab_size with more rows than pieces (e.g. padded for speed) trains and is kept."""
    spec = tiny_train_spec(tiny_corpus, tmp_path / "run", max_steps=1, validate_every=1)
    spec["model"]["vocab_size"] = 256  # the tokenizer has 200 pieces
    assert _train(spec)["step"] == 1
    assert yaml.safe_load((tmp_path / "run" / "spec.yaml").read_text())["model"]["vocab_size"] == 256


def test_corrupt_checkpoint_falls_back_to_previous(tiny_corpus: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    _train(tiny_train_spec(tiny_corpus, run))
    newest = RunDir(run).step_checkpoints()[-1]
    newest.write_bytes(newest.read_bytes()[:1000])  # truncated
    with pytest.raises(CheckpointError, match=str(newest)):
        read_checkpoint(newest)
    events: list[tuple[str, dict]] = []
    train(load_spec(tiny_train_spec(tiny_corpus, run, max_steps=7)), lambda k, d: events.append((k, d)))
    warnings = [d["message"] for k, d in events if k == "warning"]
    assert any(str(newest) in w and "previous" in w for w in warnings)
    assert any("resumed from step_00000003" in d.get("message", "") for _, d in events)


def test_a_run_whose_checkpoints_are_all_unreadable_is_refused_not_restarted(tiny_corpus: Path,
                                                                             tmp_path: Path) -> None:
    """Starting over would overwrite the run's logs, best weights and checkpoints: one line, none of them
    changed (spec.yaml records the new call's budget, as on any resume)."""
    run = tmp_path / "run"
    _train(tiny_train_spec(tiny_corpus, run))
    for path in RunDir(run).step_checkpoints():
        path.write_bytes(path.read_bytes()[:1000])
    def files() -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name not in (".lock", "spec.yaml")}

    before = files()
    with pytest.raises(TbuildError, match="none of its 2 checkpoints can be read.*--fresh"):
        train(load_spec(tiny_train_spec(tiny_corpus, run, max_steps=7)), lambda k, d: None)
    assert files() == before


def test_average_checkpoints(tiny_corpus: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    _train(tiny_train_spec(tiny_corpus, run))
    paths = RunDir(run).step_checkpoints()
    averaged, meta = average_checkpoints(paths)
    (a, _), (b, _) = read_checkpoint(paths[0]), read_checkpoint(paths[1])
    for k, v in averaged.items():
        torch.testing.assert_close(v, (a[k] + b[k]) / 2)
    other = tmp_path / "other"
    spec = tiny_train_spec(tiny_corpus, other, max_steps=3)
    spec["model"]["d_model"] = 16
    _train(spec)
    with pytest.raises(CheckpointError, match="refusing to average"):
        average_checkpoints([paths[0], RunDir(other).step_checkpoints()[0]])
    model = build_model(load_spec(run / "spec.yaml").spec)
    with pytest.raises(CheckpointError, match="another model"):
        expect = load_spec(run / "spec.yaml").spec.architecture_hash()
        load_into(RunDir(other).step_checkpoints()[0], model, expect_hash=expect)


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from tbuild.cli.app import main; main()", *args]


@pytest.mark.slow
def test_sigkill_then_rerun_resumes(tiny_corpus: Path, tmp_path: Path) -> None:
    """A run killed with SIGKILL at any moment resumes from its last whole checkpoint."""
    run = tmp_path / "run"
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(tiny_train_spec(tiny_corpus, run, max_steps=400, checkpoint_every=2,
                                                        validate_every=1000)))
    proc = subprocess.Popen(_cli("train", str(spec_path)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(RunDir(run).step_checkpoints()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    saved = RunDir(run).step_checkpoints()
    assert saved, "no checkpoint before the kill"
    for path in saved:
        read_checkpoint(path)  # every checkpoint on disk is whole
    last = int(saved[-1].stem.split("_")[1])
    out = subprocess.run(_cli("train", str(spec_path), "--set", f"train.max_steps={last + 2}"),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert f"resumed from {saved[-1].name}" in out.stdout
    steps = [r["step"] for r in read_jsonl(run / "metrics.jsonl")]
    assert steps == list(range(1, last + 3))  # lines written after the last checkpoint were dropped


def test_ctrl_c_saves_and_exits_cleanly(tiny_corpus: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(tiny_train_spec(tiny_corpus, run, max_steps=100000, checkpoint_every=None,
                                                        validate_every=100000)))
    proc = subprocess.Popen(_cli("train", str(spec_path)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "200"})
    deadline = time.monotonic() + 120
    while not (run / "metrics.jsonl").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "checkpoint saved" in err
    assert RunDir(run).step_checkpoints(), "no checkpoint written on Ctrl-C"


def test_cli_train_plot_average(tiny_corpus: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tbuild.cli.app import app

    run = tmp_path / "run"
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(tiny_train_spec(tiny_corpus, run)))
    runner = CliRunner()
    result = runner.invoke(app, ["train", str(spec_path)])
    assert result.exit_code == 0, result.output
    assert "valid step 6" in result.output and "stopped at step 6: train.max_steps=6 reached" in result.output
    result = runner.invoke(app, ["plot", str(run)])
    assert result.exit_code == 0 and (run / "curves.png").read_bytes()[:4] == b"\x89PNG"
    result = runner.invoke(app, ["average", str(run), "--last", "2"])
    assert result.exit_code == 0, result.output
    assert (run / "averaged_last2.safetensors").exists()
    result = runner.invoke(app, ["average", str(run), "--last", "5"])
    assert result.exit_code == 2 and "only 2 exist" in result.output


def test_steps_read_no_tensor_values_between_logging_steps(tiny_corpus: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading a tensor's value waits for a GPU: tbuild's own code does it only on logging steps (here
    the last of 4). (PyTorch's Adam reads its step counters, which live on the host.)"""
    import sys

    from tbuild.engine.device.policy import choose_policy
    from tbuild.engine.training.run import open_trainer
    from tests.conftest import REPO

    spec = tiny_train_spec(tiny_corpus, tmp_path / "run", max_steps=4, log_every=100, checkpoint_every=None)
    spec["data"]["valid"] = None
    trainer = open_trainer(load_spec(spec), quiet, policy=choose_policy("fp32"))
    reads: list[int] = []
    for name in ("item", "__float__", "__int__", "__index__", "__bool__", "tolist"):
        real = getattr(torch.Tensor, name)

        def counted(self: torch.Tensor, _real=real) -> object:  # noqa: ANN001
            caller = sys._getframe(1).f_code.co_filename
            if caller.startswith(str(REPO)) and "/tests/" not in caller and "site-packages" not in caller:
                reads.append(trainer.state.step)
            return _real(self)

        monkeypatch.setattr(torch.Tensor, name, counted)
    trainer.train()
    assert reads and set(reads) == {4}, reads  # loss, NLL and gradient norm, read once at the final log


def test_a_run_directory_trains_in_one_process_at_a_time(tiny_corpus: Path, tmp_path: Path) -> None:
    """A second trainer on a run directory is refused, naming the process that holds it (as is --fresh);
    the lock is free again once training ends."""
    from tbuild.engine.errors import TbuildError
    from tbuild.engine.run.lock import RunLock
    from tbuild.engine.training.run import train_spec as train

    loaded = load_spec(tiny_train_spec(tiny_corpus, tmp_path / "run", max_steps=1))
    (tmp_path / "run").mkdir()
    holder = RunLock(tmp_path / "run").acquire()  # as another process training it would
    for fresh in (False, True):
        with pytest.raises(TbuildError, match=rf"run is being trained by process {os.getpid()}"):
            train(loaded, lambda kind, data: None, fresh=fresh)
    holder.release()
    assert train(loaded, lambda kind, data: None)["step"] == 1
    RunLock(tmp_path / "run").acquire().release()  # released at the end of training

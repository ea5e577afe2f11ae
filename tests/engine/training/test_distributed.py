"""Training on 2 processes (torchrun, gloo on CPU) against one process: the same updates, resume
across process counts, main-only writes, a killed rank ending the job. Every run here names the CPU, also
on a machine with a GPU (one GPU cannot take two NCCL processes, and a GPU run's curve is not a CPU run's).

One update on N processes must equal one process accumulating the same batches (the spec's
update_freq counts batches over all processes). Dropout is 0: each process draws its own masks.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from safetensors import safe_open

from tbuild.builder import load_spec
from tbuild.engine.errors import TbuildError
from tbuild.engine.run.checkpoint import read_checkpoint
from tbuild.engine.run.directory import RunDir, read_jsonl
from tbuild.engine.training import distributed
from tbuild.engine.training.run import train_spec as train
from tbuild.engine.training.sharded import MIN_TORCH
from tests.conftest import tiny_train_spec

# Records every write into the run directory, per rank, from inside each worker (Python audit events:
# open for writing, os.open with write flags, rename/replace/remove/mkdir/rmtree).
AUDIT = '''
import os, sys
_run, _log = os.environ.get("AUDIT_RUN"), os.environ.get("AUDIT_LOG")
if _run and _log and "RANK" in os.environ:
    _out = f"{_log}.{os.environ['RANK']}"
    _W = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    def _inside(p):
        try:
            return os.path.abspath(os.fsdecode(p)).startswith(_run)
        except Exception:
            return False
    def _hook(event, args):
        paths = []
        if event == "open" and args[0] is not None and not isinstance(args[0], int):
            mode, flags = args[1], args[2] or 0
            if (mode and any(c in mode for c in "wax+")) or (mode is None and flags & _W):
                paths = [args[0]]
        elif event in ("os.rename", "os.replace"):
            paths = [args[0], args[1]]
        elif event in ("os.remove", "os.mkdir", "os.rmdir", "shutil.rmtree", "os.truncate"):
            paths = [args[0]]
        hits = [os.fsdecode(p) for p in paths if _inside(p)]
        if hits:
            with open(_out, "a") as f:  # outside the run directory
                f.write(event + " " + " ".join(hits) + "\\n")
    sys.addaudithook(_hook)
'''

NEEDS_FSDP_CHECKPOINTS = pytest.mark.skipif(torch.__version__ < MIN_TORCH,
                                            reason=f"sharded (FSDP) checkpoints need torch >= {MIN_TORCH}")


def quiet(kind: str, data: dict) -> None:
    pass


def _spec(corpus: Path, run: Path, **train_cfg: object) -> dict:
    # clip_norm 0.5: the gradient norm is ~1, so clipping (sharding-aware under FSDP2) is at work
    cfg = {"max_steps": 6, "update_freq": 2, "checkpoint_every": 3, "validate_every": 3, "clip_norm": 0.5, **train_cfg}
    spec = tiny_train_spec(corpus, run, **cfg)
    spec["model"]["dropout"] = {"residual": 0.0, "embedding": 0.0}
    return spec


def _torchrun(spec: dict, folder: Path, *extra: str, audit: Path | None = None,
              wait: bool = True) -> subprocess.CompletedProcess | subprocess.Popen:
    """`tbuild train SPEC --nproc 2` in a subprocess (it starts torchrun)."""
    path = folder / f"{Path(spec['output_dir']).name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TBUILD_DIST_TIMEOUT_S": "60"}
    if audit is not None:
        (audit / "sitecustomize.py").write_text(AUDIT)
        env.update(PYTHONPATH=str(audit), AUDIT_RUN=str(Path(spec["output_dir"]).resolve()),
                   AUDIT_LOG=str(audit / "writes"))
    cmd = [sys.executable, "-m", "tbuild.cli", "train", str(path), "--nproc", "2", "--device", "cpu", *extra]
    if not wait:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def _assert_same_curve(a: Path, b: Path, steps: list[int]) -> None:
    """metrics.jsonl of two runs: the same steps, loss, NLL and gradient norm (relative 1e-5)."""
    ra = {r["step"]: r for r in read_jsonl(a / "metrics.jsonl")}
    rb = {r["step"]: r for r in read_jsonl(b / "metrics.jsonl")}
    assert sorted(rb) == steps, sorted(rb)
    for step in steps:
        for key in ("loss", "nll", "grad_norm"):
            assert rb[step][key] == pytest.approx(ra[step][key], rel=1e-5), (step, key)
        assert rb[step]["tokens_per_s"] > 0


def _assert_same_weights(a: Path, b: Path, step: int) -> None:
    """The weights of two runs' step checkpoints agree to relative 1e-5 (absolute 1e-6 near zero).
    The key projections' biases are left out: their true gradient is exactly 0 (softmax over keys
    ignores a shift that is the same for every key), so what they get is rounding noise of ~1e-10,
    which Adam (update ≈ lr · g / |g|) blows up to ±lr whatever order the sums were taken in."""
    wa, _ = read_checkpoint(RunDir(a).checkpoint(step))
    wb, _ = read_checkpoint(RunDir(b).checkpoint(step))  # under FSDP: the weights-only file
    assert sorted(k for k in wa if k.startswith("model.")) == sorted(k for k in wb if k.startswith("model."))
    compared = [k for k in wa if k.startswith("model.") and not k.endswith("w_k.bias")]
    assert len(compared) > 20
    for k in compared:
        torch.testing.assert_close(wb[k], wa[k], rtol=1e-5, atol=1e-6, msg=k)


@pytest.fixture(scope="module")
def reference(tiny_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One process, 6 updates of 2 batches each, checkpoints at 3 and 6."""
    run = tmp_path_factory.mktemp("one") / "run"
    train(load_spec(_spec(tiny_corpus, run)), quiet, device="cpu")
    return run


@pytest.fixture(scope="module")
def ddp_run(tiny_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """2 DDP processes, 3 updates (each process takes 1 batch of each update); every write audited."""
    folder = tmp_path_factory.mktemp("ddp")
    audit = folder / "audit"
    audit.mkdir()
    _torchrun(_spec(tiny_corpus, folder / "run", max_steps=3), folder, audit=audit)
    return folder / "run", audit


def test_ddp_updates_equal_one_process_on_the_union(reference: Path, ddp_run: tuple[Path, Path]) -> None:
    """Loss, gradient norm (it would be off by the world size if the gradient averaging were not
    undone) and weights after 3 updates equal the single process's, to 1e-5."""
    run, _ = ddp_run
    _assert_same_curve(reference, run, [1, 2, 3])
    _assert_same_weights(reference, run, 3)
    _, meta = read_checkpoint(RunDir(run).checkpoint(3))
    _, ref_meta = read_checkpoint(RunDir(reference).checkpoint(3))
    assert meta["batch_index"] == ref_meta["batch_index"] == 6  # global batches consumed this epoch


def test_only_the_main_process_writes(ddp_run: tuple[Path, Path]) -> None:
    run, audit = ddp_run
    main = (audit / "writes.0").read_text()
    assert "step_00000003.safetensors" in main and "metrics.jsonl" in main and "spm.model" in main
    assert not (audit / "writes.1").exists(), (audit / "writes.1").read_text()
    assert (run / "best.safetensors").exists() and (run / "valid.jsonl").exists()


def test_two_processes_resume_on_one(reference: Path, ddp_run: tuple[Path, Path], tmp_path: Path,
                                     tiny_corpus: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(ddp_run[0], run)
    events: list[tuple[str, dict]] = []
    train(load_spec(_spec(tiny_corpus, run)), lambda k, d: events.append((k, d)), device="cpu")
    assert any("resumed from step_00000003" in d.get("message", "") for _, d in events)
    _assert_same_curve(reference, run, [1, 2, 3, 4, 5, 6])
    _assert_same_weights(reference, run, 6)


@pytest.mark.parametrize("strategy", ["ddp", pytest.param("fsdp", marks=NEEDS_FSDP_CHECKPOINTS)])
def test_one_process_resumes_on_two(reference: Path, tmp_path: Path, tiny_corpus: Path, strategy: str) -> None:
    run = tmp_path / "run"
    shutil.copytree(reference, run)
    for path in RunDir(run).step_checkpoints()[1:]:
        path.unlink()  # as if the single process had stopped at step 3
    result = _torchrun(_spec(tiny_corpus, run, distributed={"strategy": strategy}), tmp_path)
    assert "resumed from step_00000003" in result.stdout
    _assert_same_curve(reference, run, [1, 2, 3, 4, 5, 6])
    _assert_same_weights(reference, run, 6)


@pytest.fixture(scope="module")
def fsdp_run(tiny_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """2 FSDP2 processes, 3 updates, a checkpoint at step 3; every write audited."""
    if torch.__version__ < MIN_TORCH:
        pytest.skip(NEEDS_FSDP_CHECKPOINTS.kwargs["reason"])
    folder = tmp_path_factory.mktemp("fsdp")
    audit = folder / "audit"
    audit.mkdir()
    _torchrun(_spec(tiny_corpus, folder / "run", max_steps=3, distributed={"strategy": "fsdp"}), folder, audit=audit)
    return folder / "run", audit


def _fsdp_spec(tiny_corpus: Path, run: Path, **cfg: object) -> dict:
    return _spec(tiny_corpus, run, distributed={"strategy": "fsdp"}, **cfg)


def _shard_headers(folder: Path) -> dict[str, dict[str, list[int]]]:
    """file name -> {tensor name: shape} of a sharded checkpoint's safetensors files (headers only)."""
    out = {}
    for path in sorted(folder.glob("*.safetensors")):
        with safe_open(str(path), framework="pt") as f:
            out[path.name] = {k: list(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118
    return out


def test_fsdp_updates_equal_one_process(reference: Path, fsdp_run: tuple[Path, Path]) -> None:
    """FSDP2: the same updates as one process; the weights-only file holds the gathered weights."""
    run, _ = fsdp_run
    _assert_same_curve(reference, run, [1, 2, 3])
    _assert_same_weights(reference, run, 3)


def test_fsdp_checkpoint_is_per_rank_shards(reference: Path, fsdp_run: tuple[Path, Path]) -> None:
    """step_3.dcp/ holds one safetensors file per rank, each with only its shards of the optimizer
    state (together all of it), the meta in JSON, and no pickled DCP ``.metadata``; step_3.safetensors
    holds the weights only."""
    run, _ = fsdp_run
    folder = RunDir(run).sharded_checkpoint(3)
    files = _shard_headers(folder)
    assert len(files) == 2 and sorted(p.name for p in folder.iterdir()) == sorted([*files, "tbuild.json"])
    assert not list(run.rglob("*.metadata")) and not list(run.rglob("*.tmp"))
    full, ref_meta = read_checkpoint(RunDir(reference).checkpoint(3))
    rows: dict[str, int] = {}  # moment tensor -> its rows over both files
    for shapes in files.values():
        for key, shape in shapes.items():
            if key.startswith("optim.") and key.endswith((".exp_avg", ".exp_avg_sq")):
                rows[key] = rows.get(key, 0) + shape[0]
    n_params = len([k for k in full if k.startswith("optim.") and k.endswith(".exp_avg")])
    assert len(rows) == 2 * n_params  # every parameter's two Adam moments are stored
    split = [k for k, n in rows.items() if n > 1]
    assert len(split) > 20
    for file, shapes in files.items():  # each file holds only part of every moment with > 1 row
        assert all(shapes.get(k, [0])[0] < rows[k] for k in split), f"{file} holds a whole moment tensor"
    meta = json.loads((folder / "tbuild.json").read_text())
    assert meta["world"] == 2 and meta["strategy"] == "fsdp" and meta["step"] == 3
    assert meta["batch_index"] == ref_meta["batch_index"] and sorted(meta["shards"]) == sorted(files)
    weights, weights_meta = read_checkpoint(RunDir(run).checkpoint(3))
    assert weights and all(k.startswith("model.") for k in weights) and weights_meta["kind"] == "weights"


def test_fsdp_only_the_main_process_writes_beside_its_shard(fsdp_run: tuple[Path, Path]) -> None:
    """Rank 1 writes its own shard file inside the temporary DCP directory (and asks for that
    directory, which rank 0 made), nothing else; rank 0 writes everything else."""
    run, audit = fsdp_run
    tmp = str((RunDir(run).sharded_checkpoint(3)).resolve()) + ".tmp"
    main = (audit / "writes.0").read_text()
    assert "step_00000003.safetensors" in main and "tbuild.json" in main and f"os.rename {tmp} " in main, main
    writes = [line.split(" ", 1) for line in (audit / "writes.1").read_text().splitlines()]
    assert writes and all(event in ("open", "os.mkdir") for event, _ in writes), writes
    shard = [path for event, path in writes if event == "open"]
    assert shard and set(shard) == {f"{tmp}/shard-00002-model-00001-of-00001.safetensors"}, shard
    assert {path for event, path in writes if event == "os.mkdir"} <= {tmp}


def test_fsdp_resumes_on_one_process_without_unpickling(reference: Path, fsdp_run: tuple[Path, Path],
                                                        tmp_path: Path, tiny_corpus: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """One process (no process group) resumes from the 2-process sharded checkpoint (weights and the
    sharded optimizer state) and continues the uninterrupted curve; nothing is unpickled; a newer
    checkpoint with a truncated shard is reported and passed over, and replaced when that step is saved."""
    run = tmp_path / "run"
    shutil.copytree(fsdp_run[0], run)
    broken = RunDir(run).sharded_checkpoint(6)
    shutil.copytree(RunDir(run).sharded_checkpoint(3), broken)
    shard = sorted(broken.glob("*.safetensors"))[1]
    shard.write_bytes(shard.read_bytes()[:-10])

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("unpickling while resuming")

    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse)
    events: list[tuple[str, dict]] = []
    train(load_spec(_fsdp_spec(tiny_corpus, run)), lambda k, d: events.append((k, d)), device="cpu")
    monkeypatch.undo()
    messages = [d.get("message", "") for _, d in events]
    assert any("step_00000006.dcp: shard files truncated" in m and "falling back" in m for m in messages), messages
    assert any("resumed from step_00000003.dcp (step 3" in m for m in messages), messages
    _assert_same_curve(reference, run, [1, 2, 3, 4, 5, 6])
    _assert_same_weights(reference, run, 6)
    assert [p.name for p in RunDir(run).resume_points()] == ["step_00000003.dcp", "step_00000006.safetensors"]


def test_fsdp_resumes_on_two_processes(reference: Path, fsdp_run: tuple[Path, Path], tmp_path: Path,
                                       tiny_corpus: Path) -> None:
    """Two processes resume from the sharded checkpoint and continue the uninterrupted curve; the
    temporary directory of a save killed mid-write is passed over and then removed."""
    run = tmp_path / "run"
    shutil.copytree(fsdp_run[0], run)
    stale = RunDir(run).checkpoints / "step_00000005.dcp.tmp"
    stale.mkdir()
    (stale / "shard-00001-model-00001-of-00001.safetensors").write_bytes(b"partial")
    result = _torchrun(_fsdp_spec(tiny_corpus, run), tmp_path)
    assert "resumed from step_00000003.dcp (step 3" in result.stdout and "warning" not in result.stdout
    _assert_same_curve(reference, run, [1, 2, 3, 4, 5, 6])
    _assert_same_weights(reference, run, 6)
    assert not stale.exists() and RunDir(run).sharded_checkpoint(6).is_dir()
    assert [p.name for p in RunDir(run).resume_points()] == ["step_00000003.dcp", "step_00000006.dcp"]


def test_fsdp_weights_decode_and_average_on_one_process(fsdp_run: tuple[Path, Path], tmp_path: Path) -> None:
    """The weights-only file of an FSDP run is what `tbuild decode` and `tbuild average` read."""
    from typer.testing import CliRunner

    from tbuild.cli.app import app

    run = tmp_path / "run"
    shutil.copytree(fsdp_run[0], run)
    (run / "best.safetensors").unlink()  # decode falls back to the newest step checkpoint
    runner = CliRunner()
    decoded = runner.invoke(app, ["decode", str(run)], input="A dog runs.\nA cat.\n")
    assert decoded.exit_code == 0, decoded.output
    assert len(decoded.stdout.splitlines()) == 2
    named = runner.invoke(app, ["decode", str(RunDir(run).checkpoint(3))], input="A dog runs.\nA cat.\n")
    assert named.exit_code == 0 and named.stdout == decoded.stdout
    averaged = runner.invoke(app, ["average", str(run), "--last", "1"])
    assert averaged.exit_code == 0, averaged.output
    tensors, _ = read_checkpoint(run / "averaged_last1.safetensors")
    weights, _ = read_checkpoint(RunDir(run).checkpoint(3))
    assert sorted(tensors) == sorted(weights)


def test_update_freq_must_split_over_the_processes(tmp_path: Path, tiny_corpus: Path) -> None:
    spec = _spec(tiny_corpus, tmp_path / "run", update_freq=3)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-m", "tbuild.cli", "train", str(path), "--nproc", "2"], env=env,
                            capture_output=True, text=True, timeout=240)
    assert result.returncode != 0
    assert "train.update_freq (3) must be a multiple of the number of processes (2)" in result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr and "starting 2 processes" not in result.stdout


def _workers(root: int) -> dict[int, int]:
    """rank -> pid of the torchrun workers below process ``root``."""
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        todo += [int(c) for c in children]
        ranks = [e[5:] for e in env if e.startswith(b"RANK=")]
        if ranks and b"TORCHELASTIC_RUN_ID=" in b"\0".join(env):
            found[int(ranks[0])] = pid
    return found


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="finds the workers through /proc")
def test_a_killed_rank_ends_the_job_and_a_rerun_resumes(tmp_path: Path, tiny_corpus: Path) -> None:
    run = tmp_path / "run"
    spec = _spec(tiny_corpus, run, max_steps=100000, checkpoint_every=2, validate_every=100000, log_every=1)
    job = _torchrun(spec, tmp_path, wait=False)
    deadline = time.monotonic() + 120
    while not RunDir(run).step_checkpoints() and time.monotonic() < deadline and job.poll() is None:
        time.sleep(0.2)
    workers = _workers(job.pid)
    assert RunDir(run).step_checkpoints() and 1 in workers, (workers, job.poll())
    killed = time.monotonic()
    os.kill(workers[1], signal.SIGKILL)
    try:
        out, _ = job.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        pytest.fail("the job did not end within 60 s of a rank being killed")
    assert job.returncode == 1 and time.monotonic() - killed < 60
    assert "a training process failed" in out and "run the same command to resume" in out
    saved = int(RunDir(run).step_checkpoints()[-1].stem.split("_")[1])
    events: list[tuple[str, dict]] = []
    result = train(load_spec(_spec(tiny_corpus, run, max_steps=saved + 2, update_freq=2)),
                   lambda k, d: events.append((k, d)), device="cpu")
    assert any(f"resumed from step_{saved:08d}" in d.get("message", "") for _, d in events)
    assert result["step"] == saved + 2


def test_more_processes_than_gpus_on_a_machine_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two NCCL ranks on one GPU fail or hang (seen on an H100): refused before the process group."""
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    expected = r"2 training processes on this machine but 1 GPU\(s\): NCCL needs one GPU per process \(--nproc 1, or"
    with pytest.raises(TbuildError, match=expected):
        distributed.init(distributed.Rank(0, 2, 0, local_world=2), torch.device("cuda"))
    distributed.check_gpus(2, torch.device("cpu"))  # gloo on the CPU takes any number
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert distributed.rank_from_env() == distributed.Rank(3, 4, 1, 2)

"""`tbuild train`: train a spec with a live progress display (plain log lines when not on a terminal)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from .common import console, err_console, guarded, load
from .options import DEVICE, SET_OPTION
from .progress import Quiet, Reporter

if TYPE_CHECKING:
    from tbuild.builder.loader import LoadedSpec


@guarded
def train(
    spec: Path = typer.Argument(..., help="A spec file (its run directory is runs/NAME under the working "
                                "directory, unless output_dir is set), or a run directory to train further."),
    set_: list[str] = SET_OPTION,
    minutes: float | None = typer.Option(None, "--minutes", min=0, help="Train this many more minutes, then stop "
                                         "(the spec's train.max_minutes stays the run's total over all resumes)."),
    fresh: bool = typer.Option(False, "--fresh", help="Delete the run directory (only a tbuild run directory) and "
                               "start over."),
    device: str = DEVICE,
    nproc: int | None = typer.Option(None, "--nproc", min=1, help="Train on this many processes on this machine "
                                     "(one per GPU; gloo on CPU): starts torchrun for you."),
    nnodes: str | None = typer.Option(None, "--nnodes", help="With --nproc: machines taking part (torchrun)."),
    rdzv: str | None = typer.Option(None, "--rdzv-endpoint", help="With --nproc on several machines: HOST:PORT "
                                    "of the rendezvous (torchrun's c10d backend)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what changed since the run directory's last "
                                 "training call and what each change does (or why it is refused); train nothing."),
    profile: int | None = typer.Option(None, "--profile", min=1, help="Run this many training steps under "
                                       "torch.profiler (after 3 untimed ones) and print GPU busy %, top kernels and "
                                       "host gaps; the trace goes to RUN/profile/. Saves no checkpoint."),
) -> None:
    """Train a spec; re-running on the same run directory resumes where it stopped (on any number
    of processes)."""
    overrides = list(set_ or [])
    if spec.is_dir():  # a run directory trains on in place, wherever it is
        overrides = [f"output_dir={json.dumps(str(spec))}", *overrides]
    if dry_run:
        _changes(load(spec, overrides))
    elif profile is not None:
        _profile(load(spec, overrides), profile, device)
    elif nproc is not None and "WORLD_SIZE" not in os.environ:
        from tbuild.engine.device.policy import choose_device
        from tbuild.engine.training.distributed import check_gpus
        from tbuild.engine.training.run import check_training

        nodes = int(nnodes) if nnodes and nnodes.isdigit() else 1  # a range (MIN:MAX) is checked by each worker
        check_training(load(spec, overrides).spec, nproc * nodes, minutes)  # before any process starts
        check_gpus(nproc, choose_device(device))
        args = ["train", str(spec), *(a for s in overrides for a in ("--set", s)), "--device", device]
        args += [*(["--minutes", str(minutes)] if minutes is not None else []), *(["--fresh"] if fresh else [])]
        _launch(nproc, args, nnodes, rdzv)
    else:
        _train_here(load(spec, overrides), fresh, device, minutes)


def _changes(loaded: LoadedSpec) -> None:
    from tbuild.engine.training.changes import changes_since_last_call

    run, changes = changes_since_last_call(loaded)
    if changes is None:
        console.print(f"{run.path}: no run there yet; training would start one", highlight=False,
                      soft_wrap=True)
    elif not changes:
        console.print(f"{run.path}: nothing changed since its last call; training would resume", highlight=False,
                      soft_wrap=True)
    else:
        console.print(f"{run.path}: {len(changes)} change{'s' if len(changes) > 1 else ''} since its last call; "
                      "training would resume with:", highlight=False, soft_wrap=True)
        for change in changes:
            console.print(f"  {change.line()}", highlight=False, markup=False, soft_wrap=True)
    if loaded.spec.train.init is not None and not run.resume_points():  # what it would load from train.init's source
        from tbuild.engine.finetune.preview import preview_plan

        for line in preview_plan(loaded):
            console.print(line, highlight=False, markup=False, soft_wrap=True)


def _profile(loaded: LoadedSpec, steps: int, device: str) -> None:
    from tbuild.engine.device.process import configure_process
    from tbuild.engine.training.run import profile_spec

    configure_process(loaded.spec.train.threads)
    result = profile_spec(loaded, Reporter(), steps, device=device)
    for line in result.lines():
        console.print(line, highlight=False, markup=False, soft_wrap=True)


def _train_here(loaded: LoadedSpec, fresh: bool, device: str, minutes: float | None) -> None:
    """Train in this process: alone, or as one of the processes torchrun started."""
    from tbuild.engine.device.process import configure_process
    from tbuild.engine.training.distributed import rank_from_env
    from tbuild.engine.training.run import train_spec

    rank = rank_from_env()
    # Processes on one machine share its cores unless train.threads says otherwise.
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    process = configure_process(loaded.spec.train.threads or max(1, cores // local_world))
    emit = Reporter() if rank.is_main else Quiet(rank.index)
    result = train_spec(loaded, emit, device=device, rank=rank, after_step=process.after_step, fresh=fresh,
                   minutes=minutes)
    if result["reason"] == "interrupted":
        if rank.is_main:
            err_console.print(f"interrupted at step {result['step']}: checkpoint saved; run the same command "
                              "to resume")
        raise typer.Exit(130)


def _launch(nproc: int, args: list[str], nnodes: str | None, rdzv: str | None) -> None:
    """Run ``tbuild ARGS`` on ``nproc`` processes through torchrun and wait; Ctrl-C reaches the
    workers (one process group), which stop cleanly together, so this process only waits."""
    from tbuild.engine.training.distributed import launcher

    cmd = launcher(nproc, args, nnodes=nnodes, rdzv=rdzv)
    console.print(f"starting {nproc} processes: {shlex.join(cmd)}", highlight=False, soft_wrap=True)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        code = subprocess.run(cmd, check=False).returncode
    finally:
        signal.signal(signal.SIGINT, previous)
    if code == 0:
        return
    if code == 130 or code == -signal.SIGINT:
        raise typer.Exit(130)
    err_console.print(f"[bold red]error:[/] a training process failed (torchrun exited with {code}; its report is "
                      "above); run the same command to resume from the last checkpoint", highlight=False)
    raise typer.Exit(1)

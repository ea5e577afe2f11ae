"""Training a run directory in this process: join the process group, choose device and precision,
lock the directory, prepare what the run trains from (tokenizer, the spec resolved against it, data,
and where training begins: ``train.init``), then hand the trainer plain values and train.

The main process writes into the run directory; the others wait for it, then read what it wrote."""

from __future__ import annotations

import gc
import shutil
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch

from tbuild.builder import LoadedSpec
from tbuild.builder.spec import Spec

from ..data.prepare import prepared_id
from ..data.tokenizer import fit_vocab
from ..device.policy import Policy, choose_device, choose_policy, model_widths
from ..errors import TbuildError
from ..finetune.lora import check_adapters
from ..finetune.start import init_located, resolve_start, start_source, start_tokenizer
from ..run.directory import RunDir, delete_run, run_dir_of
from ..run.lock import LOCK, RunLock
from ..start.spelling import spelling_patches
from ..tasks.registry import task_of
from . import distributed
from .changes import stored_changes
from .distributed import Rank
from .loggers import check_loggers
from .profile import Profile, profile_steps
from .trainer import Event, Trainer, TrainingInputs

Log = Callable[[str], None]


def train_spec(loaded: LoadedSpec, emit: Event, *, device: str = "auto", rank: Rank = Rank(),
               after_step: Callable[[int], None] = lambda step: None, fresh: bool = False,
               minutes: float | None = None) -> dict[str, Any]:
    """Train ``loaded`` in this process (alone, or as one of torchrun's); returns the final step, the stop
    reason, the best validation perplexity and the training seconds. ``minutes`` caps this call's
    training time; ``fresh`` deletes the run directory first."""
    check_training(loaded.spec, rank.world, minutes)
    base = distributed.init(rank, choose_device(device))
    trainer = None
    try:
        policy = _policy(loaded.spec, device, base, rank)
        trainer = open_trainer(loaded, emit, policy=policy, rank=rank, fresh=fresh)
        return trainer.train(minutes=minutes, after_step=after_step)
    finally:
        # The trainer's DDP wrapper holds the process group: freed after the group is destroyed, gloo's
        # destructor waits for ever on its threads. So the trainer goes first, then the group.
        trainer = None  # noqa: F841
        if rank.distributed:
            gc.collect()  # and whatever still holds the wrapper through a reference cycle
        distributed.shutdown()


def profile_spec(loaded: LoadedSpec, emit: Event, steps: int, *, device: str = "auto") -> Profile:
    """``steps`` training steps of ``loaded``'s run under torch.profiler (``profile.py``), in one process;
    the run directory is prepared as training would, and no checkpoint is written."""
    check_training(loaded.spec, 1, None)
    policy = _policy(loaded.spec, device, choose_device(device), Rank())
    trainer = open_trainer(loaded, emit, policy=policy)
    return profile_steps(trainer, steps, trainer.run.path / "profile")


def check_training(spec: Spec, world: int, minutes: float | None) -> None:
    """What can refuse a training call before anything is prepared or any process started: no stop (no
    max_steps, max_epochs or max_minutes, and no ``minutes``), a tracker not installed, an update that
    does not split over ``world`` processes, adapters that fit no module of the model."""
    cfg = spec.train
    if cfg.max_steps is None and cfg.max_epochs is None and cfg.max_minutes is None and minutes is None:
        raise TbuildError("training needs a stop: set train.max_steps, train.max_epochs or train.max_minutes, "
                          "or give this call one (tbuild train --minutes N)")
    check_loggers(cfg.log)
    distributed.check_update_freq(cfg.update_freq, world)
    check_adapters(spec)


def _policy(spec: Spec, device: str, base: torch.device, rank: Rank) -> Policy:
    """Device and precision; on a CPU the main process measures bf16 first, the others read its cached figure."""
    if not rank.is_main:
        distributed.barrier(rank)
    policy = replace(choose_policy(spec.train.precision, device, widths=model_widths(spec)), device=base)
    if rank.is_main:
        distributed.barrier(rank)
    return policy


def open_trainer(loaded: LoadedSpec, emit: Event, *, policy: Policy, rank: Rank = Rank(),
                 fresh: bool = False) -> Trainer:
    """A trainer for ``loaded`` holding its run directory's lock (main process), ready to train."""
    run = run_dir_of(loaded)
    new = fresh or not run.path.exists()
    lock = _lock(run, fresh) if rank.is_main else RunLock(run.path)
    try:
        if rank.is_main:  # the others wait, then read what it wrote
            inputs = prepare_inputs(loaded, run, emit)
        distributed.barrier(rank)
        if not rank.is_main:
            inputs = prepare_inputs(loaded, run, emit, main=False)
        return Trainer(inputs, run, emit, policy=policy, rank=rank, lock=lock)
    except BaseException as e:
        lock.release()
        if rank.is_main and new and (isinstance(e, TbuildError) or {p.name for p in run.path.iterdir()} <= {LOCK}):
            # a new run refused (a check that needs its tokenizer or data), or failed before it wrote anything,
            # leaves no folder behind: its spec.yaml would refuse the corrected spec as a change to a run
            shutil.rmtree(run.path)
        raise


def _lock(run: RunDir, fresh: bool) -> RunLock:
    """The run directory's lock (after deleting the directory with ``fresh``: never one being trained)."""
    if fresh:
        if run.path.is_dir():
            RunLock(run.path).acquire().release()
        delete_run(run.path)
    run.path.mkdir(parents=True, exist_ok=True)
    return RunLock(run.path).acquire()


def prepare_inputs(loaded: LoadedSpec, run: RunDir, emit: Event, *, main: bool = True) -> TrainingInputs:
    """The run's tokenizer, the spec resolved against it (stored in the run directory, each change since
    its last call said with what it does, or refused), the data, and where training begins."""
    def info(message: str) -> None:
        emit("info", {"message": message})

    log: Log = info if main else lambda _: None
    with init_located(loaded):  # its errors name the spec's line
        source = start_source(loaded.spec, run)  # train.init's trained model, at the run's start
        tokenizer = start_tokenizer(loaded.spec, run, source, info, main=main)
    task = task_of(loaded.spec)
    spec = task.fit_labels(fit_vocab(loaded.spec, tokenizer, info), info).model_copy(update={"name": loaded.name})
    if main:
        for change in stored_changes(run, spec):
            info(f"changed since the run's last call: {change.line()}")
        run.write_spec(spec)
    train_pairs, valid_pairs = task.training_data(spec, tokenizer, run, info)
    with init_located(loaded):
        initial = resolve_start(spec, run, tokenizer, source, log, main=main)
    initial = replace(initial, patches={**initial.patches, **spelling_patches(spec, tokenizer)})
    return TrainingInputs(spec, tokenizer, train_pairs, valid_pairs, prepared_id(run.prepared("train")), initial,
                          task)


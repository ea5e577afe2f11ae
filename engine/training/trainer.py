"""The trainer (§5): token batches, Adam with the §5.3 schedule, validation, periodic atomic checkpoints and
exact resume. The run's task owns the maths: a batch's loss (``Task.loss``: label smoothing, R-Drop), the
validation loss pass and which score is better (``tasks/base.py``).

One ``Trainer`` per process, made from plain values (``run.py`` prepares them: ``TrainingInputs`` with
its ``Initial`` values, the policy, the lock). Each concern has one place: ``Rank`` says which process this
is and only the main one writes into the run directory; ``_wrapped`` wraps the model for several
processes (``self.module`` runs the steps, ``self.model`` is saved and validated; ``distributed.py``);
``BatchCursor``'s shard is this process's share of the batches; ``Policy`` chooses device, autocast and
the fp16 loss scaler.

The data rule on N processes: an update is ``update_freq`` consecutive batches of the epoch's list,
whatever N; process r takes the batches r, r + N, ... of it (``update_freq`` must be a multiple of N).
The loss is normalised by the update's target tokens summed over all processes, so one update on N
processes is the update of one process accumulating the same batches, and a checkpoint's data
position (global batches consumed this epoch) resumes the same batch sequence on any N.
"""

from __future__ import annotations

import hashlib
import math
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any

import torch
from torch import nn

from tbuild.builder import build_model
from tbuild.builder.spec import Spec, TrainSpec

from ..data.batches import BatchCursor, BatchSource, epoch_rows
from ..data.packing import pair_indices
from ..data.tokenizer import Tokenizer
from ..device.policy import Policy
from ..errors import CheckpointError, TbuildError
from ..run.checkpoint import load_into, model_tensors, save_checkpoint, save_weights
from ..run.directory import RunDir
from ..run.lock import RunLock
from ..run.machine import machine_facts, record_machine
from ..start.values import Initial
from ..tasks.base import Task
from . import distributed
from .batching import Batching
from .compiled import compile_model, compile_plan, graphs, step_begins
from .distributed import Rank
from .feed import BatchFeed
from .loggers import open_loggers
from .metrics import LogWindow, MetricsLog
from .precision_check import PrecisionCheck, autocast, cpu_key, decided, resumed
from .scoring import scored, whole_model
from .state import StopSignal, TrainState

Event = Callable[[str, dict[str, Any]], None]

__all__ = ["Event", "Rank", "Trainer", "TrainingInputs"]


@dataclass(frozen=True)
class TrainingInputs:
    """What a run trains from: the spec resolved against its tokenizer (as stored in the run directory),
    the tokenizer, the prepared training pairs and their identity, the validation pairs, the run's
    initial values and its task."""

    spec: Spec
    tokenizer: Tokenizer
    train_pairs: BatchSource  # prepared pairs, or a tagger's or classifier's examples (joined: data/joined.py)
    valid_pairs: BatchSource | None
    data_id: str | None
    initial: Initial
    task: Task  # a batch's loss, the validation loss pass, what validation decodes and scores


def _sharded() -> ModuleType:
    """The FSDP2 checkpoint module, imported only where a sharded checkpoint is saved or loaded: it
    imports torch.distributed.checkpoint, whose safetensors storage needs a newer torch than the rest."""
    from . import sharded

    return sharded


class Trainer:
    """Train a run from ``inputs`` in its directory ``run``, resuming from the newest readable checkpoint
    there. Every attribute is set here, once; ``lock`` is the run directory's (held by the main process),
    released when ``train`` ends however it ends."""

    def __init__(self, inputs: TrainingInputs, run: RunDir, emit: Event, *, policy: Policy, rank: Rank = Rank(),
                 lock: RunLock | None = None) -> None:
        self.spec, self.cfg, self.run, self.emit = inputs.spec, inputs.spec.train, run, emit
        self.policy, self.rank, self.lock = policy, rank, lock or RunLock(run.path)
        self.train_pairs, self.valid_pairs, self.data_id = inputs.train_pairs, inputs.valid_pairs, inputs.data_id
        self.task = inputs.task
        self.model = _built(inputs.spec, inputs.initial, policy.device)
        self.saved = inputs.initial.saved  # the tensors checkpoints hold: an adapter run's adapters, else all
        # The model itself, or its DDP wrapper; FSDP2 shards self.model in place. The steps run it, or its
        # compiled form (which hides the wrapper's no_sync: accumulation asks the wrapper itself).
        self.wrapped = distributed.wrap(self.model, self.cfg.distributed.strategy, rank, policy.device)
        self.sharded = distributed.is_sharded(self.wrapped)
        if self.sharded:
            _sharded().require_torch()  # before the first step, not at the first checkpoint
        self.scaler = policy.grad_scaler()
        self.compiling = compile_plan(self.cfg.compile, policy.device, batch_tokens=self.cfg.batch_tokens,
                                      params=sum(p.numel() for p in self.model.parameters()),
                                      max_steps=self.cfg.max_steps)
        self.module = compile_model(self.wrapped, mode=self.compiling.mode) if self.compiling.on else self.wrapped
        self.graphs = graphs()  # compiled so far in this process: the growth is reported
        self.batching = Batching(inputs.train_pairs, self.cfg, policy.shape_buckets(self.compiling.cuda_graphs),
                                 inputs.spec.model.max_positions, inputs.spec.special())
        self.batching.check(self.model)
        self.params = [p for p in self.model.parameters() if p.requires_grad]  # frozen ones get no state
        self.optimizer = _adam(self.cfg, self.params, policy.device)
        inputs.initial.load_moments(self.model, self.optimizer)
        self.schedule_offset = inputs.initial.schedule_offset  # steps the schedule is ahead of this run's own
        self.state, self.saved_step, resumed_data = self._restore()
        self.policy, checking = resumed(self.policy, self.state.precision, self.state.precision_cpu)
        self.check = PrecisionCheck(self.policy.precision, self.state.step) \
            if checking and rank.world == 1 and not self.compiling.on else None
        self._restart_data_if_changed(resumed_data)
        self._select_metric()
        self.scorer = inputs.task.valid_scorer(inputs.spec, inputs.tokenizer, policy) if self.valid_pairs is not None \
            else None
        self.elapsed_before = self.state.elapsed  # training seconds of the earlier calls
        self.minutes: float | None = None  # this call's budget, set by train
        self._seed_dropout()
        epoch, index = self._position()
        self.batches = BatchCursor(self.train_pairs.src_lengths, self.train_pairs.tgt_lengths, self.cfg.batch_tokens,
                                   seed=self.cfg.seed, epoch=epoch, index=index, shard=(rank.index, rank.world),
                                   per_update=self.cfg.update_freq, cut=self.batching.cut)
        self.feed = self._feed(self.batches)
        self.metrics = (MetricsLog(run.path, open_loggers(self.cfg.log, inputs.spec, run.path))
                        if rank.is_main else None)
        if self.metrics is not None:
            self.metrics.truncate_after(self.state.step)  # lines a killed process wrote after its checkpoint
        self._say_setup()

    def _feed(self, cursor: BatchCursor) -> BatchFeed:
        return BatchFeed(cursor, self.batching.collate, to_device=self.policy.to_device, pin=self.policy.pin,
                         ahead=self.policy.feed_ahead)

    def read_from(self, cursor: BatchCursor) -> None:
        """Take the training batches from ``cursor`` instead (a benchmark's replay of given batches)."""
        self.feed.close()
        self.batches, self.feed = cursor, self._feed(cursor)

    def info(self, message: str) -> None:
        self.emit("info", {"message": message})

    def _say_setup(self) -> None:
        """The run's size, processes, device and precision (and the machine, in the run directory)."""
        world = self.rank.world
        n_params = sum(p.numel() for p in self.model.parameters())
        procs = f"{world} processes ({self.cfg.distributed.strategy}), " if world > 1 else ""
        what = self.task.unit  # a language model's lines, or source-target pairs
        pairs = len(epoch_rows(self.train_pairs, self.state.epoch))  # sampled data: the epoch's variant
        self.info(f"{self.spec.name}: {n_params:,} parameters, {pairs:,} training {what}, {procs}"
                  f"device {self.policy.device.type}, {_threads(torch.get_num_threads())}")
        precision = self.policy.note or f"precision {self.policy.precision}"
        self.info(precision)
        if self.compiling.on or self.policy.device.type == "cuda" or self.batching.length:
            self.info(f"{self.compiling.why}; {self.batching.describe(self.batches.batches)}")
        if self.rank.is_main:
            record_machine(self.run.path, machine_facts(self.policy.device, precision, world))
        if self.policy.warning:
            self.emit("warning", {"message": self.policy.warning})

    def _position(self) -> tuple[int, int]:
        """This process's (epoch, index into its shard) from the saved position, which counts the
        epoch's batches consumed by all processes (so it means the same on any number of them)."""
        world, consumed = self.rank.world, self.state.batch_index
        if consumed % world:
            self.emit("warning", {"message": f"data position {consumed} is not a multiple of {world} processes; "
                                             f"{consumed % world} batches are seen again"})
        return self.state.epoch, consumed // world

    def _seed_dropout(self) -> None:
        """On several processes each one draws its own dropout masks: the torch RNG is seeded from
        (seed, step, rank), so a resumed run draws the same masks as an uninterrupted one on the same
        number of processes (one process keeps the RNG state saved in the checkpoint)."""
        if self.rank.distributed:
            key = hashlib.sha256(f"{self.cfg.seed}:{self.state.step}:{self.rank.index}".encode()).digest()
            torch.manual_seed(int.from_bytes(key[:8], "little"))

    def _restore(self) -> tuple[TrainState, int, str | None]:
        """The state of the newest readable checkpoint (a corrupt one is reported and the previous one
        used), the step it was saved at and the identity of the data it was trained on. A run whose
        checkpoints are all unreadable is refused: starting over would overwrite its history."""
        points = self.run.resume_points()
        for path in reversed(points):
            try:
                # a sharded (FSDP) checkpoint directory on any number of processes, else a whole file
                load = (_sharded().load_sharded if path.is_dir() else _sharded().load_into if self.sharded
                        else partial(load_into, only=self.saved))
                meta = load(path, self.model, self.optimizer, expect_hash=self.spec.architecture_hash())
            except CheckpointError as e:
                self.emit("warning", {"message": f"{e}; falling back to the previous checkpoint"})
                continue
            state = TrainState.from_meta(meta)
            if meta.get("grad_scale") is not None and self.scaler.is_enabled():
                self.scaler.update(float(meta["grad_scale"]))
            self.info(f"resumed from {path.name} (step {state.step}, epoch {state.epoch + 1})")
            return state, state.step, meta.get("data")
        if points:
            raise TbuildError(f"{self.run.path}: none of its {len(points)} checkpoints can be read (see the "
                              "warnings above); train into another output_dir, or start over with --fresh")
        return TrainState(), -1, None

    def _restart_data_if_changed(self, resumed_data: str | None) -> None:
        """A checkpoint's data position means nothing in other prepared data: start a new epoch."""
        if self.state.step and resumed_data not in (None, self.data_id):
            self.state.epoch, self.state.batch_index = self.state.epoch + 1, 0
            self.info(f"data.train was prepared anew since step {self.state.step}: reading it from the start "
                      f"of epoch {self.state.epoch + 1}")

    def _select_metric(self) -> None:
        """Validations count by train.select.metric; a best score saved in another metric starts over."""
        metric = self.cfg.select.metric
        before = self.state.metric
        if self.state.select(metric) and self.state.step:
            self.info(f"train.select.metric changed from {before} to {metric}: the best score starts over "
                      "(best.safetensors is replaced at the next validation)")

    # ------------------------------------------------------------------ one update

    def step(self) -> dict[str, Any]:
        """One optimizer update over ``update_freq`` batches (this process's share of them), the loss
        normalised by their target tokens on all processes. Loss, NLL and gradient norm stay tensors on
        the device (float64 sums): reading them synchronises with a GPU, so that happens only on
        logging steps (``LogWindow.record``)."""
        rank = self.rank
        micro = [self.feed.next() for _ in range(self.cfg.update_freq // rank.world)]
        local = int(sum(self.train_pairs.tgt_lengths[pair_indices(fed.indices)].sum() for fed in micro))
        ntok = int(distributed.all_sum(rank, [local], self.policy.device)[0])
        # DDP/FSDP average the ranks' gradients; × world makes that the gradient of the global sum / ntok.
        scale = distributed.gradient_scale(rank) / ntok
        loss_sum = nll_sum = torch.zeros((), dtype=torch.float64, device=self.policy.device)
        timed, began = self.check is not None and self.check.timing(self.state.step), time.perf_counter()
        for i, fed in enumerate(micro):
            step_begins(self.compiling)
            with distributed.accumulating(self.wrapped, last=i == len(micro) - 1):
                loss, nll = self.task.loss(self.module, fed.tensors, self.spec, self.policy)
                self.scaler.scale(loss * scale).backward()
            loss_sum, nll_sum = loss_sum + loss.detach().double(), nll_sum + nll.double()
        if timed:
            self.check.record(self.policy.precision, time.perf_counter() - began, local)  # type: ignore[union-attr]
        grad_norm = self._apply_gradients()
        if timed:
            self._time_other(micro, local)
        self.state.step += 1
        after = micro[-1]  # the data position after this update (the feed's cursor may be further on)
        if after.epoch != self.state.epoch:
            self.emit("epoch", {"epoch": after.epoch, "step": self.state.step})
        self.state.epoch, self.state.batch_index = after.epoch, after.index * rank.world
        loss_sum, nll_sum = distributed.sum_tensors(rank, loss_sum, nll_sum)
        return {"loss": loss_sum, "nll": nll_sum, "tokens": ntok, "grad_norm": grad_norm,
                "lr": self.optimizer.param_groups[0]["lr"]}

    def _time_other(self, micro: list[Any], tokens: int) -> None:
        """The same batches' forward and backward in the other precision, timed (``precision_check.py``): their
        gradients discarded, the random streams as they were; then, once every timed step is in, the faster
        precision trains the rest, saved in the state."""
        check = self.check
        assert check is not None
        with torch.random.fork_rng(devices=[]):
            began = time.perf_counter()
            for fed in micro:
                self.task.loss(self.module, fed.tensors, self.spec, self.policy, autocast(check.other))[0].backward()
            check.record(check.other, time.perf_counter() - began, tokens)
        self.optimizer.zero_grad(set_to_none=True)
        if check.verdict() is not None:
            self.policy, line = decided(self.policy, check, self.state.step + 1)
            self.state.precision, self.state.precision_cpu, self.check = self.policy.precision, cpu_key(), None
            self.info(line)

    def _apply_gradients(self) -> torch.Tensor:
        """Clip (sharding-aware: on FSDP2's DTensor gradients the norm is the global one), set the §5.3
        learning rate and step; returns the gradient norm before clipping."""
        self.scaler.unscale_(self.optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.cfg.clip_norm or math.inf)
        if hasattr(grad_norm, "full_tensor"):
            grad_norm = grad_norm.full_tensor()  # a DTensor under FSDP2
        lr = self.cfg.schedule.rate(self.schedule_offset + self.state.step + 1, self.spec.model.d_model)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        return grad_norm

    # ------------------------------------------------------------------ validation and checkpoints

    def validate(self) -> None:
        """The task's validation loss pass (``Task.valid_loss``) and the score of train.select.metric: the task's
        figure from that pass (perplexity, a tagger's accuracy: ``Task.valid_score``), or its decoded validation
        lines' BLEU, chrF or F1 (``Task.valid_scorer``). A better score than any before (which way is better: the
        task's declaration) saves best.safetensors; another counts toward train.select.patience. Every process
        validates (an FSDP2 forward gathers weights from all) and takes the main one's score, so all decide alike;
        only the main one writes."""
        if self.valid_pairs is None:
            return
        result = self.task.valid_loss(self.model, self.valid_pairs, self.spec, self.policy)
        metric = self.cfg.select.metric
        weights, score = (self._decoded_score() if self.scorer is not None
                          else (None, self.task.valid_score(self.spec, result)))
        self.model.train()
        score = distributed.from_main(self.rank, score, self.policy.device)
        ppl = result.get("ppl")  # the perplexity, where the task's loss is a likelihood (else None)
        self.state.best_ppl = min(self.state.best_ppl, math.inf if ppl is None else ppl)
        record = {"step": self.state.step, "epoch": self.state.epoch + 1, **result, "metric": metric, "score": score}
        if self.state.record(score, lower_is_better=not self.spec.declared_task().metrics[metric]):
            record["best"] = True
            if weights is None:
                weights = self._weights()  # a collective under FSDP2: every process takes part
            if self.rank.is_main:
                save_weights(self.run.best, {f"model.{k}": v for k, v in weights.items()
                                             if self.saved is None or k in self.saved},
                             {"architecture": self.spec.architecture_hash(), "step": self.state.step,
                              "valid_ppl": ppl, "metric": metric, "valid_score": score})
        if self.metrics is not None:
            self.metrics.write_valid(record)
        self.emit("valid", record)

    def _decoded_score(self) -> tuple[dict[str, torch.Tensor] | None, float]:
        """The metric's score of the decoded validation lines, each process decoding its share with the
        model; under FSDP2 every process gathers the whole weights (returned, for best.safetensors) and
        the main one decodes all lines with a plain copy of the model holding them."""
        assert self.scorer is not None
        if not self.sharded:
            return None, scored(self.scorer, self.model, self.rank)
        weights = self._weights()  # a collective: every process takes part
        model = whole_model(self.spec, weights, self.policy.device) if self.rank.is_main else None
        return weights, scored(self.scorer, model, self.rank, whole=True)

    def _weights(self) -> dict[str, torch.Tensor]:
        """The whole model's tensors on the CPU (gathered from the shards under FSDP2)."""
        return _sharded().full_weights(self.model) if self.sharded else model_tensors(self.model)

    def save_checkpoint(self) -> None:
        """Write step_N.safetensors (weights, optimizer, RNG, data position) and keep the last ``keep_last``.
        Under FSDP2 every process writes its shards into step_N.dcp/ and step_N.safetensors holds the
        gathered weights only (``sharded.save_checkpoint``)."""
        path = self.run.checkpoint(self.state.step)
        if self.state.step == self.saved_step:
            return  # already saved at this step
        self.saved_step = self.state.step
        meta = {**self.state.meta(), "architecture": self.spec.architecture_hash(), "kind": "train",
                "data": self.data_id, "param_names": [n for n, p in self.model.named_parameters() if p.requires_grad],
                "grad_scale": self.scaler.get_scale() if self.scaler.is_enabled() else None}
        if self.sharded:
            _sharded().save_checkpoint(self.run.sharded_checkpoint(self.state.step), path, self.model, meta,
                                       self.optimizer, write=self.rank.is_main)
        elif self.rank.is_main:
            save_checkpoint(path, self.model, meta, self.optimizer, only=self.saved)
            shutil.rmtree(self.run.sharded_checkpoint(self.state.step), ignore_errors=True)  # else preferred
        if not self.rank.is_main:
            return
        self.run.prune(self.cfg.keep_last)
        self.emit("checkpoint", {"step": self.state.step})

    # ------------------------------------------------------------------ the loop

    def stop_reason(self) -> str | None:
        """Why training stops now (max_steps, max_epochs, max_minutes: the run's totals; patience: the
        early stop of train.select; minutes: this call's budget), or None."""
        cfg, state = self.cfg, self.state
        if cfg.max_steps is not None and state.step >= cfg.max_steps:
            return "max_steps"
        if cfg.max_epochs is not None and state.epoch >= cfg.max_epochs:
            return "max_epochs"
        return self._patience_reason() or self._time_reason()

    def _patience_reason(self) -> str | None:
        """The patience stop, when train.select.patience validations in a row found no better score (the count
        is the same on every process: it counts the main process's scores)."""
        patience = self.cfg.select.patience
        return "patience" if patience is not None and self.state.stale >= patience else None

    def _time_reason(self) -> str | None:
        if self.cfg.max_minutes is not None and self.state.elapsed >= 60 * self.cfg.max_minutes:
            return "max_minutes"
        if self.minutes is not None and self.state.elapsed - self.elapsed_before >= 60 * self.minutes:
            return "minutes"
        return None

    def describe_stop(self, reason: str) -> str:
        """``reason`` in words, naming the budget that ended training."""
        cfg = self.cfg
        if reason == "max_minutes":
            return f"the run's time budget, train.max_minutes={cfg.max_minutes:g} over all resumes, is spent"
        if reason == "minutes":
            return f"--minutes {self.minutes:g} done; run the same command to train more"
        if reason in ("max_steps", "max_epochs"):
            return f"train.{reason}={getattr(cfg, reason)} reached"
        if reason == "patience":
            best = "none" if self.state.best_score is None else f"{self.state.best_score:.4g}"
            return (f"early stop: {self.state.stale} validations in a row without a better {self.state.metric} "
                    f"(train.select.patience={cfg.select.patience}; best {best}, in best.safetensors)")
        return reason

    def _report_graphs(self) -> None:
        """Say when torch.compile has built graphs since the last report (at the first steps; later only if a
        new shape or mode needs one, bounded by ``compiled.GRAPH_LIMIT``)."""
        if self.compiling.on and (now := graphs()) > self.graphs:
            self.info(f"torch.compile: {now - self.graphs} graph(s) built at step {self.state.step} ({now} in all)")
            self.graphs = now

    def _agree(self, stop: StopSignal, last_save: float) -> tuple[str | None, bool, bool]:
        """(stop reason, interrupted, checkpoint now by the clock), the same on every process: a flag
        that depends on time or signals is set everywhere when any process sets it (one tiny all-reduce),
        so all stop or checkpoint at the same step and none is left waiting in a collective."""
        minutes = self.cfg.checkpoint_minutes
        timed = minutes is not None and time.monotonic() - last_save >= 60 * minutes
        reason = self.stop_reason()
        over_total, over_call = reason == "max_minutes", reason == "minutes"
        interrupted, over_total, over_call, timed = distributed.any_rank(
            self.rank, [stop.requested, over_total, over_call, timed], self.policy.device)
        return reason or ("max_minutes" if over_total else "minutes" if over_call else None), interrupted, timed

    def train(self, *, minutes: float | None = None,
              after_step: Callable[[int], None] = lambda step: None) -> dict[str, Any]:
        """Step until a stop (max steps/epochs/minutes; ``minutes`` caps this call, ``train.max_minutes``
        the run over all resumes; ``train.select.patience`` validations without a better score; or
        Ctrl-C/SIGTERM on any process: a clean stop at a step boundary); validate at the end (unless the
        stop came from a validation) and save a final checkpoint. ``after_step(step)`` is the entry point's
        housekeeping between steps (e.g. trimming the heap). The run's lock is released however it ends."""
        self.minutes, stop = minutes, StopSignal()
        try:
            with stop.installed():
                reason = self._loop(stop, after_step)
        finally:
            self.close()
        state = self.state
        # stop_requested: a Ctrl-C that came with another stop (the last step) still asks the caller to stop
        result = {"step": state.step, "reason": reason, "why": self.describe_stop(reason), "best_ppl": state.best_ppl,
                  "metric": state.metric, "best_score": state.best_score, "elapsed": state.elapsed,
                  "elapsed_call": state.elapsed - self.elapsed_before, "stop_requested": stop.requested}
        self.emit("end", result)
        return result

    def close(self) -> None:
        """Stop the batch feed's worker, release the run's lock, close the metrics loggers."""
        self.feed.close()
        self.lock.release()
        if self.metrics is not None:
            self.metrics.close()

    def _loop(self, stop: StopSignal, after_step: Callable[[int], None]) -> str:
        """The steps, with logging, validation and checkpoints; returns why they stopped."""
        cfg, state = self.cfg, self.state
        self.emit("start", {"step": state.step, "max_steps": cfg.max_steps, "run_dir": str(self.run.path)})
        window = LogWindow()
        reason, interrupted = self.stop_reason(), False
        last_save = time.monotonic()
        self.model.train()
        while reason is None and not interrupted:
            started = time.monotonic()
            stats = self.step()
            state.elapsed += time.monotonic() - started
            window.add(stats)
            self._report_graphs()
            reason, interrupted, timed = self._agree(stop, last_save)
            after_step(state.step)
            if state.step % cfg.log_every == 0 or reason is not None:
                record = window.record(state.step, state.epoch + 1, state.elapsed, stats["lr"])
                if self.metrics is not None:
                    self.metrics.write_train(record)
                self.emit("log", record)
            if state.step % cfg.validate_every == 0 and reason is None:
                self.validate()
                reason = self._patience_reason()
            if (cfg.checkpoint_every and state.step % cfg.checkpoint_every == 0) or timed:
                self.save_checkpoint()
                last_save = time.monotonic()
        if reason not in (None, "patience"):  # patience: this step has just been validated
            self.validate()
        self.save_checkpoint()
        return reason or "interrupted"

def _threads(n: int) -> str:
    return "1 thread" if n == 1 else f"{n} threads"


def _built(spec: Spec, initial: Initial, device: torch.device) -> nn.Module:
    """The spec's model on ``device`` (seeded: the same initialisation on every process), with its initial
    values written in and its frozen parameters frozen (before any wrapper: DDP keeps the parameters that
    train when it is built)."""
    torch.manual_seed(spec.train.seed)
    random.seed(spec.train.seed)
    model = build_model(spec).to(device)
    initial.apply(model)
    return model


def _adam(cfg: TrainSpec, params: list[nn.Parameter], device: torch.device) -> torch.optim.Optimizer:
    """Adam (§5.3); AdamW with weight_decay 0 is exactly Adam, and decoupled decay when asked for. The
    fused kernel (one launch for all parameters) on CUDA; CPU has no fused AdamW to gain from."""
    opt = cfg.optimizer
    optimizer = torch.optim.AdamW(params, lr=0.0, betas=opt.betas, eps=opt.eps, weight_decay=opt.weight_decay,
                                  fused=True if device.type == "cuda" else None)
    optimizer.zero_grad(set_to_none=True)
    return optimizer

"""The trainer (§5): token batches, label smoothing, Adam with the §5.3 schedule, validation,
periodic atomic checkpoints and exact resume.

One ``Trainer`` per run. Each concern has one place: ``Rank`` says which process this is and only the
main one writes into the run directory; ``_setup_model`` is where a wrapper (DDP/FSDP) would go
(``self.module`` runs the steps, ``self.model`` is saved and validated); ``BatchCursor``'s shard is this
process's share of the batches; ``Policy`` chooses device and autocast.
"""

from __future__ import annotations

import math
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from tbuild.builder import LoadedSpec, build_model
from tbuild.builder.schema import Spec
from tbuild.builder.tokens import PAD

from ..checkpoint import load_into, model_tensors, save_checkpoint, save_weights
from ..data.batches import BatchCursor, Bucketing, collate
from ..data.pairs import load_pairs
from ..data.prepare import prepared_train
from ..data.tokenizer import fit_vocab, prepare_tokenizer
from ..errors import CheckpointError
from ..loss import evaluate_loss, label_smoothed_nll
from ..policy import Policy, choose_policy
from ..run_dir import run_dir_of
from .compiled import compile_model
from .metrics import LogWindow, MetricsLog
from .state import StopSignal, TrainState

Event = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class Rank:
    """This process among the training processes; only the main one writes into the run directory."""

    index: int = 0
    world: int = 1

    @property
    def is_main(self) -> bool:
        return self.index == 0


class Trainer:
    """Train ``loaded.spec`` in its run directory, resuming from the newest readable checkpoint there.
    ``after_step(step)`` is the entry point's housekeeping between steps (e.g. trimming the heap)."""

    def __init__(self, loaded: LoadedSpec, emit: Event, *, policy: Policy | None = None, rank: Rank = Rank(),
                 after_step: Callable[[int], None] = lambda step: None, fresh: bool = False) -> None:
        self.loaded, self.emit, self.rank, self.after_step, self.fresh = loaded, emit, rank, after_step, fresh
        self.cfg = loaded.spec.train
        self.policy = policy or choose_policy(self.cfg.precision)
        self.run = run_dir_of(loaded)
        self.state = TrainState()

    def info(self, message: str) -> None:
        self.emit("info", {"message": message})

    # ------------------------------------------------------------------ setup

    def setup(self) -> Trainer:
        if self.fresh and self.rank.is_main and self.run.path.exists():
            shutil.rmtree(self.run.path)
        self.run.path.mkdir(parents=True, exist_ok=True)
        self.spec = self._setup_spec()
        self._setup_data()
        self._setup_model()
        self._setup_optimizer()
        self.state = TrainState() if self.fresh else self._restore()
        data = self.train_pairs
        self.batches = BatchCursor(data.src_lengths, data.tgt_lengths, self.cfg.batch_tokens, seed=self.cfg.seed,
                                   epoch=self.state.epoch, index=self.state.batch_index,
                                   shard=(self.rank.index, self.rank.world))
        self.metrics = MetricsLog(self.run.path) if self.rank.is_main else None
        if self.metrics is not None:
            self.metrics.truncate_after(self.state.step)  # lines a killed process wrote after its checkpoint
        n_params = sum(p.numel() for p in self.model.parameters())
        self.info(f"{self.spec.name}: {n_params:,} parameters, {len(self.train_pairs):,} training pairs, device "
                  f"{self.policy.device.type}, {torch.get_num_threads()} threads, precision {self.policy.precision}")
        return self

    def _setup_spec(self) -> Spec:
        """The run's tokenizer, and the spec resolved against it (stored in the run directory)."""
        self.tokenizer = prepare_tokenizer(self.loaded.spec, self.run, self.info)
        spec = fit_vocab(self.loaded.spec, self.tokenizer, self.info)
        spec = spec.model_copy(update={"name": self.loaded.name})
        if self.rank.is_main:
            self.run.write_spec(spec)
        return spec

    def _setup_data(self) -> None:
        self.train_pairs = prepared_train(self.spec, self.tokenizer, self.run, self.info)
        self.valid_pairs = None
        if self.spec.data.valid is not None:
            self.valid_pairs = load_pairs(self.spec, "valid", self.tokenizer, self.info)

    def _setup_model(self) -> None:
        torch.manual_seed(self.cfg.seed)
        random.seed(self.cfg.seed)
        self.model = build_model(self.spec).to(self.policy.device)
        self.module = self.model  # what the steps run; a DDP/FSDP wrapper of self.model goes here
        if self.cfg.compile:
            self.module = compile_model(self.module)
        pad_multiple, row_steps = self.policy.shape_buckets
        self.bucketing = Bucketing(pad_multiple if self.cfg.pad_multiple is None else self.cfg.pad_multiple,
                                   row_steps if self.cfg.row_steps is None else self.cfg.row_steps,
                                   max_len=self.spec.model.max_positions)

    def _setup_optimizer(self) -> None:
        opt = self.cfg.optimizer
        # Adam (§5.3); AdamW with weight_decay 0 is exactly Adam, and decoupled decay when asked for.
        # The fused kernel (one launch for all parameters) on CUDA; CPU has no fused AdamW to gain from.
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=0.0, betas=opt.betas, eps=opt.eps,
                                           weight_decay=opt.weight_decay,
                                           fused=True if self.policy.device.type == "cuda" else None)
        self.params = [p for p in self.model.parameters() if p.requires_grad]

    def _restore(self) -> TrainState:
        """The state of the newest readable checkpoint; a corrupt one is reported and the previous one used."""
        for path in reversed(self.run.step_checkpoints()):
            try:
                meta = load_into(path, self.model, self.optimizer, expect_hash=self.spec.architecture_hash())
            except CheckpointError as e:
                self.emit("warning", {"message": f"{e}; falling back to the previous checkpoint"})
                continue
            state = TrainState.from_meta(meta)
            self.info(f"resumed from {path.name} (step {state.step}, epoch {state.epoch + 1})")
            return state
        return TrainState()

    # ------------------------------------------------------------------ one update

    def step(self) -> dict[str, Any]:
        """One optimizer update over ``update_freq`` batches, the loss normalised by their target tokens.
        Loss, NLL and gradient norm stay tensors on the device (float64 sums): reading them synchronises
        with a GPU, so that happens only on logging steps (``LogWindow.record``)."""
        self.optimizer.zero_grad(set_to_none=True)
        micro = [self.batches.next() for _ in range(self.cfg.update_freq)]
        ntok = int(sum(self.train_pairs.tgt_lengths[batch].sum() for batch in micro))
        loss_sum = nll_sum = torch.zeros((), dtype=torch.float64, device=self.policy.device)
        for batch in micro:
            tensors = collate(self.train_pairs, batch, bucketing=self.bucketing)
            src, tgt_in, tgt_out = (self.policy.to_device(t) for t in tensors)
            with self.policy.autocast(), self.policy.attention():
                logits = self.module(src, tgt_in)
            loss, nll, _ = label_smoothed_nll(logits, tgt_out, self.cfg.label_smoothing, PAD)
            (loss / ntok).backward()
            loss_sum, nll_sum = loss_sum + loss.detach().double(), nll_sum + nll.double()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.cfg.clip_norm or math.inf)
        lr = self.cfg.schedule.rate(self.state.step + 1, self.spec.model.d_model)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        self.state.step += 1
        if self.batches.epoch != self.state.epoch:
            self.emit("epoch", {"epoch": self.batches.epoch, "step": self.state.step})
        self.state.epoch, self.state.batch_index = self.batches.epoch, self.batches.index
        return {"loss": loss_sum, "nll": nll_sum, "tokens": ntok, "grad_norm": grad_norm, "lr": lr}

    # ------------------------------------------------------------------ validation and checkpoints

    def validate(self) -> None:
        """Validation loss and perplexity; the best weights so far go to best.safetensors."""
        if self.valid_pairs is None:
            return
        result = evaluate_loss(self.model, self.valid_pairs, batch_tokens=self.cfg.batch_tokens,
                               label_smoothing=self.cfg.label_smoothing, policy=self.policy)
        self.model.train()
        record = {"step": self.state.step, "epoch": self.state.epoch + 1, **result}
        if result["ppl"] < self.state.best_ppl:
            self.state.best_ppl = result["ppl"]
            record["best"] = True
            if self.rank.is_main:
                save_weights(self.run.best, {f"model.{k}": v for k, v in model_tensors(self.model).items()},
                             {"architecture": self.spec.architecture_hash(), "step": self.state.step,
                              "valid_ppl": result["ppl"]})
        if self.metrics is not None:
            self.metrics.write_valid(record)
        self.emit("valid", record)

    def save_checkpoint(self) -> None:
        """Write step_N.safetensors (weights, optimizer, RNG, data position) and keep the last ``keep_last``."""
        path = self.run.checkpoint(self.state.step)
        if not self.rank.is_main or self.run.step_checkpoints()[-1:] == [path]:
            return  # not ours to write, or already saved at this step
        meta = {**self.state.meta(), "architecture": self.spec.architecture_hash(), "kind": "train"}
        save_checkpoint(path, self.model, meta, self.optimizer)
        for old in self.run.step_checkpoints()[:-self.cfg.keep_last]:
            old.unlink(missing_ok=True)
        self.emit("checkpoint", {"step": self.state.step})

    # ------------------------------------------------------------------ the loop

    def stop_reason(self) -> str | None:
        cfg, state = self.cfg, self.state
        if cfg.max_steps is not None and state.step >= cfg.max_steps:
            return "max_steps"
        if cfg.max_epochs is not None and state.epoch >= cfg.max_epochs:
            return "max_epochs"
        if cfg.max_minutes is not None and state.elapsed >= 60 * cfg.max_minutes:
            return "max_minutes"
        return None

    def train(self) -> dict[str, Any]:
        """Step until a stop (max steps/epochs/minutes, or Ctrl-C/SIGTERM: a clean stop at a step
        boundary); validate at the end and save a final checkpoint."""
        cfg, state = self.cfg, self.state
        self.emit("start", {"step": state.step, "max_steps": cfg.max_steps, "run_dir": str(self.run.path)})
        stop, window = StopSignal(), LogWindow()
        reason = self.stop_reason()
        last_save = time.monotonic()
        self.model.train()
        with stop.installed():
            while reason is None and not stop.requested:
                started = time.monotonic()
                stats = self.step()
                state.elapsed += time.monotonic() - started
                window.add(stats)
                reason = self.stop_reason()
                self.after_step(state.step)
                if state.step % cfg.log_every == 0 or reason is not None:
                    record = window.record(state.step, state.epoch + 1, state.elapsed, stats["lr"])
                    if self.metrics is not None:
                        self.metrics.write_train(record)
                    self.emit("log", record)
                if state.step % cfg.validate_every == 0 and reason is None:
                    self.validate()
                minutes = cfg.checkpoint_minutes
                timed = minutes is not None and time.monotonic() - last_save >= 60 * minutes
                if (cfg.checkpoint_every and state.step % cfg.checkpoint_every == 0) or timed:
                    self.save_checkpoint()
                    last_save = time.monotonic()
            if reason is not None:
                self.validate()
            self.save_checkpoint()
        result = {"step": state.step, "reason": reason or "interrupted", "best_ppl": state.best_ppl,
                  "elapsed": state.elapsed}
        self.emit("end", result)
        return result


def train(loaded: LoadedSpec, emit: Event, *, fresh: bool = False, policy: Policy | None = None,
          after_step: Callable[[int], None] = lambda step: None) -> dict[str, Any]:
    """Set up a ``Trainer`` for ``loaded`` and train it; returns the final step, stop reason, best
    validation perplexity and training seconds."""
    return Trainer(loaded, emit, policy=policy, after_step=after_step, fresh=fresh).setup().train()

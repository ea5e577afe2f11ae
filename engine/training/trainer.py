"""The training loop (§5): token batches, label smoothing, Adam with the §5.3 schedule,
validation, periodic atomic checkpoints, and exact resume."""

from __future__ import annotations

import math
import random
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from tbuild.builder import LoadedSpec, build_model
from tbuild.builder.schema import Spec
from tbuild.components.transformer import EncoderDecoder

from ..checkpoint import (
    CheckpointError,
    checkpoint_path,
    load_into,
    model_tensors,
    save_checkpoint,
    save_weights,
    step_checkpoints,
)
from ..data.batches import collate, token_batches
from ..data.pairs import Pairs, load_pairs, prepare_tokenizer
from ..loss import label_smoothed_nll
from ..process import autocast, pick_device, release_free_memory, set_threads
from ..run_dir import BEST_FILE, write_resolved_spec
from ..tokens import PAD
from .metrics import MetricsLog
from .schedule import learning_rate

Event = Callable[[str, dict[str, Any]], None]


@dataclass
class TrainState:
    """Everything besides tensors that a resumed run needs to continue exactly."""

    step: int = 0
    epoch: int = 0
    batch_index: int = 0  # next batch of `epoch` to use
    elapsed: float = 0.0  # training seconds across resumes
    best_ppl: float = math.inf
    python_rng: Any = None
    history: list[dict] = field(default_factory=list)

    def meta(self) -> dict[str, Any]:
        return {"step": self.step, "epoch": self.epoch, "batch_index": self.batch_index,
                "elapsed": self.elapsed, "best_ppl": self.best_ppl if math.isfinite(self.best_ppl) else None,
                "python_rng": _jsonable_rng(random.getstate())}


def _jsonable_rng(state: tuple) -> list:
    version, internal, gauss = state
    return [version, list(internal), gauss]


def _restore_rng(state: list) -> None:
    version, internal, gauss = state
    random.setstate((version, tuple(internal), gauss))


class _StopSignal:
    """Ctrl-C / SIGTERM request a clean stop at the next step boundary."""

    def __init__(self) -> None:
        self.requested = False

    @contextmanager
    def installed(self) -> Iterator[None]:
        def handler(signum: int, frame: Any) -> None:  # noqa: ARG001
            if self.requested:  # a second Ctrl-C: stop now
                raise KeyboardInterrupt
            self.requested = True

        previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, h in previous.items():
                signal.signal(s, h)


class BatchCursor:
    """Walks the training batches epoch after epoch from a saved data position (epoch, index)."""

    def __init__(self, pairs: Pairs, spec: Spec, epoch: int, index: int) -> None:
        self.src_lens = [len(s) for s in pairs.src]
        self.tgt_lens = [len(t) for t in pairs.tgt]
        self.batch_tokens, self.seed = spec.train.batch_tokens, spec.train.seed
        self.epoch, self.index = epoch, index
        self.batches = self._epoch_batches()

    def _epoch_batches(self) -> list[list[int]]:
        return token_batches(self.src_lens, self.tgt_lens, self.batch_tokens, seed=self.seed, epoch=self.epoch)

    def next(self) -> list[int]:
        batch = self.batches[self.index]
        self.index += 1
        if self.index == len(self.batches):
            self.epoch, self.index = self.epoch + 1, 0
            self.batches = self._epoch_batches()
        return batch


@torch.no_grad()
def evaluate_loss(model: EncoderDecoder, pairs: Pairs, spec: Spec, device: torch.device) -> dict[str, float]:
    """Label-smoothed loss, NLL and perplexity per target token on ``pairs``."""
    model.eval()
    loss_sum = nll_sum = 0.0
    ntokens = 0
    batches = token_batches([len(s) for s in pairs.src], [len(t) for t in pairs.tgt],
                            spec.train.batch_tokens, seed=0, epoch=0, shuffle=False)
    for batch in batches:
        src, tgt_in, tgt_out = (t.to(device) for t in collate(pairs, batch))
        with autocast(device, spec.train.precision):
            logits = model(src, tgt_in)
        loss, nll, n = label_smoothed_nll(logits, tgt_out, spec.train.label_smoothing, PAD)
        loss_sum, nll_sum, ntokens = loss_sum + loss.item(), nll_sum + nll.item(), ntokens + n
    n = max(ntokens, 1)
    return {"loss": loss_sum / n, "nll": nll_sum / n, "ppl": math.exp(min(nll_sum / n, 50.0)), "tokens": ntokens}


def _restore(run_dir: Path, model: EncoderDecoder, optimizer: torch.optim.Optimizer, arch: str,
             emit: Event) -> TrainState:
    """Load the newest readable checkpoint; a corrupt one is reported and the previous one used."""
    for path in reversed(step_checkpoints(run_dir)):
        try:
            meta = load_into(path, model, optimizer, expect_hash=arch)
        except CheckpointError as e:
            emit("warning", {"message": f"{e}; falling back to the previous checkpoint"})
            continue
        state = TrainState(step=meta["step"], epoch=meta["epoch"], batch_index=meta["batch_index"],
                           elapsed=meta["elapsed"], best_ppl=meta.get("best_ppl") or math.inf)
        _restore_rng(meta["python_rng"])
        emit("info", {"message": f"resumed from {path.name} (step {state.step}, epoch {state.epoch + 1})"})
        return state
    return TrainState()


def train(loaded: LoadedSpec, emit: Event, *, fresh: bool = False) -> dict[str, Any]:
    """Train ``loaded.spec`` in its run directory, resuming from the newest checkpoint there."""
    run_dir = loaded.run_dir
    if fresh and run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg = loaded.spec.train
    threads = set_threads(cfg.threads)
    device = pick_device()

    def info(message: str) -> None:
        emit("info", {"message": message})

    tok = prepare_tokenizer(loaded.spec, run_dir, info)
    spec = write_resolved_spec(loaded, tok.vocab_size)
    train_pairs = load_pairs(spec, "train", tok, info, filter=True)
    valid_pairs = load_pairs(spec, "valid", tok, info, filter=False) if spec.data.valid else None

    torch.manual_seed(cfg.seed)
    random.seed(cfg.seed)
    model = build_model(spec).to(device)
    # Adam (§5.3); AdamW with weight_decay 0 is exactly Adam, and decoupled decay when asked for.
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.0, betas=cfg.optimizer.betas, eps=cfg.optimizer.eps,
                                  weight_decay=cfg.optimizer.weight_decay)
    arch = spec.architecture_hash()
    state = TrainState() if fresh else _restore(run_dir, model, optimizer, arch, emit)
    metrics = MetricsLog(run_dir)
    metrics.truncate_after(state.step)  # drop lines a killed process wrote after its last checkpoint
    n_params = sum(p.numel() for p in model.parameters())
    info(f"{spec.name}: {n_params:,} parameters, {len(train_pairs.src):,} training pairs, device {device.type}, "
         f"{threads} threads, precision {cfg.precision}")
    emit("start", {"step": state.step, "max_steps": cfg.max_steps, "run_dir": str(run_dir)})

    stop = _StopSignal()
    cursor = BatchCursor(train_pairs, spec, state.epoch, state.batch_index)
    params = [p for p in model.parameters() if p.requires_grad]
    last_ckpt_time = time.monotonic()
    log_tokens, log_time = 0, time.monotonic()
    acc = {"loss": 0.0, "nll": 0.0, "tokens": 0, "steps": 0, "grad_norm": 0.0}

    def checkpoint() -> None:
        if step_checkpoints(run_dir)[-1:] == [checkpoint_path(run_dir, state.step)]:
            return  # already saved at this step
        meta = {**state.meta(), "architecture": arch, "spec_hash": arch, "kind": "train"}
        save_checkpoint(checkpoint_path(run_dir, state.step), model, meta, optimizer)
        for old in step_checkpoints(run_dir)[:-cfg.keep_last]:
            old.unlink(missing_ok=True)
        emit("checkpoint", {"step": state.step})

    def validate() -> None:
        if valid_pairs is None:
            return
        result = evaluate_loss(model, valid_pairs, spec, device)
        model.train()
        record = {"step": state.step, "epoch": state.epoch + 1, **result}
        if result["ppl"] < state.best_ppl:
            state.best_ppl = result["ppl"]
            save_weights(run_dir / BEST_FILE, {f"model.{k}": v for k, v in model_tensors(model).items()},
                         {"architecture": arch, "spec_hash": arch, "step": state.step, "valid_ppl": result["ppl"]})
            record["best"] = True
        metrics.write_valid(record)
        emit("valid", record)

    def done() -> str | None:
        if cfg.max_steps is not None and state.step >= cfg.max_steps:
            return "max_steps"
        if cfg.max_epochs is not None and state.epoch >= cfg.max_epochs:
            return "max_epochs"
        if cfg.max_minutes is not None and state.elapsed >= 60 * cfg.max_minutes:
            return "max_minutes"
        return None

    reason = done()
    model.train()
    with stop.installed():
        while reason is None and not stop.requested:
            t0 = time.monotonic()
            optimizer.zero_grad(set_to_none=True)
            micro = [cursor.next() for _ in range(cfg.update_freq)]
            ntok = sum(len(train_pairs.tgt[i]) for batch in micro for i in batch)
            loss_sum = nll_sum = 0.0
            for batch in micro:
                src, tgt_in, tgt_out = (t.to(device) for t in collate(train_pairs, batch))
                with autocast(device, cfg.precision):
                    logits = model(src, tgt_in)
                loss, nll, _ = label_smoothed_nll(logits, tgt_out, cfg.label_smoothing, PAD)
                (loss / ntok).backward()  # normalise by the update's target tokens
                loss_sum, nll_sum = loss_sum + loss.item(), nll_sum + nll.item()
            grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.clip_norm or math.inf).item()
            lr = learning_rate(state.step + 1, cfg.schedule, spec.model.d_model)
            for group in optimizer.param_groups:
                group["lr"] = lr
            optimizer.step()
            state.step += 1
            if cursor.epoch != state.epoch:
                emit("epoch", {"epoch": cursor.epoch, "step": state.step})
            state.epoch, state.batch_index = cursor.epoch, cursor.index
            state.elapsed += time.monotonic() - t0
            acc["loss"] += loss_sum
            acc["nll"] += nll_sum
            acc["tokens"] += ntok
            acc["steps"] += 1
            acc["grad_norm"] += grad_norm
            log_tokens += ntok
            reason = done()
            if state.step % 25 == 0:
                release_free_memory()  # see reuse_freed_memory
            if state.step % cfg.log_every == 0 or reason is not None:
                now = time.monotonic()
                n = max(acc["tokens"], 1)
                record = {"step": state.step, "epoch": state.epoch + 1, "loss": acc["loss"] / n,
                          "nll": acc["nll"] / n, "ppl": math.exp(min(acc["nll"] / n, 50.0)), "lr": lr,
                          "tokens_per_s": log_tokens / max(now - log_time, 1e-9),
                          "grad_norm": acc["grad_norm"] / acc["steps"], "elapsed": state.elapsed}
                metrics.write_train(record)
                emit("log", record)
                acc = dict.fromkeys(acc, 0.0) | {"tokens": 0, "steps": 0}
                log_tokens, log_time = 0, now
            if state.step % cfg.validate_every == 0 and reason is None:
                validate()
            minutes = cfg.checkpoint_minutes
            timed = minutes is not None and time.monotonic() - last_ckpt_time >= 60 * minutes
            if (cfg.checkpoint_every and state.step % cfg.checkpoint_every == 0) or timed:
                checkpoint()
                last_ckpt_time = time.monotonic()
        if reason is not None:
            validate()
        checkpoint()
    if reason is None:
        reason = "interrupted"
    emit("end", {"step": state.step, "reason": reason, "best_ppl": state.best_ppl, "elapsed": state.elapsed})
    return {"step": state.step, "reason": reason, "best_ppl": state.best_ppl, "elapsed": state.elapsed}
